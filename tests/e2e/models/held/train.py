"""A test trial held at a slow pace until the test lets it go: like the steps model it reports a
training metric each step, checkpoints every CKPT_EVERY steps (with a validation metric), resumes
from the latest checkpoint and leaves at a checkpoint when preempted; but each step sleeps DELAY
seconds only until the file RELEASE exists, and the rest run at full speed. A test keeps such trials
running for as long as its scenario needs, with no guess at how long that is."""

import json
import os
import sys
import time

import pedl
import pedl.core

info = pedl.get_cluster_info()
hp = info.trial.hparams
total = int(hp["steps"])
delay = float(hp["delay"])
ckpt_every = int(hp["ckpt_every"])
release = hp["release"]

with pedl.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = json.loads((path / "state.json").read_text())["step"]
        print(f"resumed from {info.latest_checkpoint} at step {step}", flush=True)
    released = False
    while step < total:
        step += 1
        released = released or os.path.exists(release)
        if not released:
            time.sleep(delay)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        if step % ckpt_every == 0 or step == total:
            core.train.report_validation_metrics(steps_completed=step, metrics={"validation_loss": 1.0 / step})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _uuid):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if core.preempt.should_preempt():
                print(f"preempted at step {step}", flush=True)
                sys.exit(0)
print("done", flush=True)
