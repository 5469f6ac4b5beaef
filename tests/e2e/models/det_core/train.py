"""A training script written against Determined 0.38.1's Core API, unmodified: nothing in it knows
about pedl. It reports metrics, checkpoints to the experiment's storage, resumes from the latest
checkpoint, honours preemption and walks the searcher's operations. It also prints what it read
from /run/determined/info, so tests can check each task saw only its own files."""

import json
import os
import pathlib
import time

import determined as det

info = det.get_cluster_info()
assert info is not None, "det.get_cluster_info() is None: no /run/determined/info"
hp = info.trial.hparams
delay = float(hp.get("delay", 0.05))
ckpt_every = int(hp.get("ckpt_every", 3))

seen = sorted(os.listdir("/run/determined/info"))
print(f"info files {seen} trial {info.trial.trial_id} allocation {info.allocation_id}", flush=True)

with det.core.init() as core:
    step = 0
    if info.latest_checkpoint:
        with core.checkpoint.restore_path(info.latest_checkpoint) as path:
            step = json.loads((pathlib.Path(path) / "state.json").read_text())["step"]
        print(f"resumed from {info.latest_checkpoint} at step {step}", flush=True)
    for op in core.searcher.operations():
        loss = 1.0
        while step < op.length:
            step += 1
            time.sleep(delay)
            loss = float(hp.get("scale", 1.0)) / step
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": loss})
            if step % ckpt_every == 0 or step == op.length:
                core.train.report_validation_metrics(steps_completed=step, metrics={"validation_loss": loss})
                with core.checkpoint.store_path({"steps_completed": step}) as (path, uuid):
                    (pathlib.Path(path) / "state.json").write_text(json.dumps({"step": step}))
                print(f"checkpoint {uuid} at step {step}", flush=True)
                if core.preempt.should_preempt():
                    print(f"preempted at step {step}", flush=True)
                    raise SystemExit(0)
            op.report_progress(step)
        op.report_completed(loss)
print("done", flush=True)
