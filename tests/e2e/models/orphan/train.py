"""A trial for the fencing test. On its first run it stops after step `quiet_at` (checkpointed) and
does long work without a word to the master, until `wake_file` exists; then, orphaned, it reports on
with its old task token and writes each answer's status to `progress_file`. Resumed, it just counts."""

import json
import os
import time
from pathlib import Path

import httpx

import pedl
import pedl.core

info = pedl.get_cluster_info()
hp = info.trial.hparams
total = int(hp.get("steps", 40))
delay = float(hp.get("delay", 0.05))
ckpt_every = int(hp.get("ckpt_every", 5))
quiet_at = int(hp["quiet_at"])
wake_file, progress_file = Path(hp["wake_file"]), Path(hp["progress_file"])
pid = os.getpid()


def report_as_orphan(step: int) -> None:
    url = f"{os.environ['DET_MASTER']}/api/v1/trials/{info.trial.trial_id}/metrics"
    headers = {"Authorization": f"Bearer {os.environ['DET_SESSION_TOKEN']}"}
    while True:
        step += 1
        body = {
            "group": "training",
            "metrics": {
                "trialId": info.trial.trial_id,
                "trialRunId": info.trial.trial_run_id,
                "stepsCompleted": step,
                "metrics": {"avgMetrics": {"loss": -1.0}},
            },
        }
        try:
            status = str(httpx.post(url, content=json.dumps(body), headers=headers, timeout=10).status_code)
        except httpx.HTTPError as exc:
            status = type(exc).__name__
        with progress_file.open("a") as f:
            f.write(f"{pid} {step} {status}\n")
        print(f"orphan step {step} pid {pid}: {status}", flush=True)
        time.sleep(0.1)


with pedl.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = json.loads((path / "state.json").read_text())["step"]
        print(f"resumed from {info.latest_checkpoint} at step {step}", flush=True)
    while step < total:
        step += 1
        time.sleep(delay)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        print(f"step {step} pid {pid}", flush=True)
        if step % ckpt_every == 0 or step == total:
            core.train.report_validation_metrics(steps_completed=step, metrics={"validation_loss": 1.0 / step})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _uuid):
                (path / "state.json").write_text(json.dumps({"step": step}))
        if step == quiet_at and not info.latest_checkpoint:
            print(f"quiet pid {pid}", flush=True)
            while not wake_file.exists():
                time.sleep(0.05)
            report_as_orphan(step)
print("done", flush=True)
