"""A test trial: counts steps, reports metrics each step, checkpoints every CKPT_EVERY steps and
resumes from the latest checkpoint. Its hyperparameters steer the faults the tests need."""

import json
import os
import sys
import time

import pedl
import pedl.core

info = pedl.get_cluster_info()
hp = info.trial.hparams
total = int(hp.get("steps", 10))
delay = float(hp.get("delay", 0.05))
# the delay once resumed from a checkpoint: a test whose fault needs a slow first run (time to pause,
# to kill an agent) need not wait as long for the resumed run to finish
resumed_delay = float(hp.get("resumed_delay", delay))
ckpt_every = int(hp.get("ckpt_every", 5))
fail_at = int(hp.get("fail_at", -1))  # exit 3 at this step when not resumed from a checkpoint
always_fail = bool(hp.get("always_fail", False))
val_best_at = hp.get("val_best_at")  # validation_loss is lowest at this step (default: falls as 1/step)

with pedl.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = json.loads((path / "state.json").read_text())["step"]
        print(f"resumed from {info.latest_checkpoint} at step {step}", flush=True)
        delay = resumed_delay
    if always_fail:
        print("failing on purpose", file=sys.stderr, flush=True)
        sys.exit(4)
    while step < total:
        step += 1
        time.sleep(delay)
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
        print(f"step {step} pid {os.getpid()}", flush=True)
        if step % ckpt_every == 0 or step == total:
            loss = 1.0 / step if val_best_at is None else abs(step - int(val_best_at)) + 0.01
            core.train.report_validation_metrics(steps_completed=step, metrics={"validation_loss": loss})
            with core.checkpoint.store_path({"steps_completed": step}) as (path, _uuid):
                (path / "state.json").write_text(json.dumps({"step": step}))
            if core.preempt.should_preempt():
                print(f"preempted at step {step}", flush=True)
                sys.exit(0)
        if step == fail_at and not info.latest_checkpoint:
            print(f"crashing at step {step}", file=sys.stderr, flush=True)
            sys.exit(3)
print("done", flush=True)
