"""A trial row with its validations, checkpoints and wait reason as Determined's trialv1Trial, and its
metric reports and checkpoints as workloads (docs/det-wire.md §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.checkpoints.to_wire import checkpoint_files
from pedl.master.checkpoints.totals import NONE as NO_CHECKPOINTS
from pedl.master.checkpoints.totals import CheckpointTotals
from pedl.master.lifecycle.states import CheckpointState
from pedl.master.wire.base import ts
from pedl.master.wire.trial import (
    CheckpointWorkload,
    MetricsWorkload,
    Trial,
    TrialMetricsReport,
    WorkloadMetrics,
)

if TYPE_CHECKING:
    from pedl.master.db import models


def metrics_workload(m: models.Metric) -> MetricsWorkload:
    return MetricsWorkload(
        metrics=WorkloadMetrics(avgMetrics=m.metrics, batchMetrics=[]),
        numInputs=0,
        totalBatches=m.steps_completed,
        endTime=ts(m.report_time),
    )


def checkpoint_workload(c: models.Checkpoint) -> CheckpointWorkload:
    # det 0.38.1's `trial describe` asserts on a PARTIALLY_DELETED workload: it shows the files left as COMPLETED,
    # and one whose files are being deleted (lifecycle/checkpoint_gc_holds.py) as DELETED, since none are offered
    state = CheckpointState.COMPLETED if c.state == CheckpointState.PARTIALLY_DELETED else c.state
    if c.deleting_by is not None:
        state = CheckpointState.DELETED
    return CheckpointWorkload(
        uuid=c.uuid,
        state=state,
        totalBatches=c.steps_completed,
        endTime=ts(c.report_time),
        metadata=c.meta,
        resources=checkpoint_files(c),
    )


def trial(
    t: models.Trial,
    best_validation: models.Metric | None = None,
    latest_validation: models.Metric | None = None,
    checkpoints: CheckpointTotals = NO_CHECKPOINTS,
    best_checkpoint: models.Checkpoint | None = None,
    wait_reason: str | None = None,
) -> Trial:
    out = Trial(
        id=t.id,
        experimentId=t.experiment_id,
        hparams=t.hparams,
        restarts=t.restarts,
        startTime=ts(t.start_time),
        endTime=ts(t.end_time),
        state=t.state,
        totalBatchesProcessed=t.total_batches,
        summaryMetrics=t.summary_metrics or {},
        taskId=t.task_id,
        taskIds=[t.task_id],
        searcherMetricValue=t.best_metric,
        checkpointCount=checkpoints.count,
        totalCheckpointSize=str(checkpoints.size),
        warmStartCheckpointUuid=t.warm_start_checkpoint or "",
        latestCheckpointUuid=t.latest_checkpoint or "",
        endReason=t.end_reason,
        runnerState="",
    )
    # assigned, so set: the JSON has them only where there are some
    if best_validation is not None:
        out.bestValidation = metrics_workload(best_validation)
    if latest_validation is not None:
        out.latestValidation = metrics_workload(latest_validation)
    if best_checkpoint is not None:
        out.bestCheckpoint = checkpoint_workload(best_checkpoint)
    if wait_reason:
        out.waitReason = wait_reason
    return out


def metrics_report(m: models.Metric) -> TrialMetricsReport:
    return TrialMetricsReport(
        group=m.group,
        stepsCompleted=m.steps_completed,
        trialRunId=m.trial_run_id,
        reportTime=ts(m.report_time),
        metrics=m.metrics,
    )
