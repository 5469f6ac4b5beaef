"""A test trial that reports training metrics for steps 1..`steps` as fast as it can (one report a
step, nothing in between), then one validation report at the last step, and exits."""

import pedl
import pedl.core
from pedl.core import master_session

# batches of a thousand (the sender's bound is larger): the test's fault then lands with several batches still
# to come, however fast the master stores them
master_session.BATCH_REPORTS = 1000

total = int(pedl.get_cluster_info().trial.hparams["steps"])

with pedl.core.init() as core:
    for step in range(1, total + 1):
        core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
    print(f"queued {total} reports", flush=True)
    core.train.report_validation_metrics(steps_completed=total, metrics={"validation_loss": 1.0 / total})
print("done", flush=True)
