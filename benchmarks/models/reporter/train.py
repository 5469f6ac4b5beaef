"""A trial that reports training metrics through pedl.core as fast as it can (one report in flight at
a time, as a training loop does), notes the rate, then hands its session token to the benchmark
(in handoff-<trial id>.json) and waits until the benchmark is done posting with it."""

import json
import os
import time
from pathlib import Path

import pedl
import pedl.core

info = pedl.get_cluster_info()
hp = info.trial.hparams
reports = int(hp["reports"])
out = Path(hp["out_dir"])
metrics = {f"metric_{k}": 0.5 + k for k in range(int(hp["metric_keys"]) - 1)}

with pedl.core.init() as core:
    started = time.perf_counter()
    for step in range(1, reports + 1):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step, **metrics})
    seconds = time.perf_counter() - started
    print(f"{reports} reports in {seconds:.2f}s: {reports / seconds:.0f} reports/s", flush=True)
    handoff = {
        "reports": reports,
        "seconds": seconds,
        "token": info.session_token,
        "trial_id": info.trial.trial_id,
        "trial_run_id": info.trial.trial_run_id,
    }
    name = f"handoff-{info.trial.trial_id}.json"
    (out / f"{name}.tmp").write_text(json.dumps(handoff))
    os.replace(out / f"{name}.tmp", out / name)
    deadline = time.monotonic() + float(hp["wait_s"])
    while not (out / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
