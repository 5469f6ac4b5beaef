"""Determined's trialv1Trial and the workloads a trial shows (v1MetricsWorkload, v1CheckpointWorkload), with
the answers of the trial routes: one trial, its workloads, its metric reports, trials compared."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from pedl.master.wire.base import Pagination, WireModel


class WorkloadMetrics(WireModel):
    """v1Metrics of a workload: the report's values (pedl keeps no batch metrics)."""

    avgMetrics: dict[str, Any]
    batchMetrics: list[Any]


class MetricsWorkload(WireModel):
    """v1MetricsWorkload: one training or validation report. det's `experiment describe` needs endTime."""

    metrics: WorkloadMetrics
    numInputs: int
    totalBatches: int
    endTime: str


class CheckpointWorkload(WireModel):
    """v1CheckpointWorkload: a checkpoint as a trial's workload and its bestCheckpoint; resources are
    relative paths to sizes (int64 as strings)."""

    uuid: str
    state: str
    totalBatches: int
    endTime: str
    metadata: dict[str, Any]
    resources: dict[str, str]


class Trial(WireModel):
    """trialv1Trial. The validations, best checkpoint and waitReason (pedl's own: why its queued allocation
    waits) are left out of the JSON where unset."""

    id: int
    experimentId: int
    hparams: dict[str, Any]
    restarts: int
    startTime: str
    endTime: str | None
    state: str
    totalBatchesProcessed: int
    summaryMetrics: dict[str, Any]
    taskId: str
    taskIds: list[str]
    searcherMetricValue: float | None
    checkpointCount: int
    totalCheckpointSize: str
    warmStartCheckpointUuid: str
    latestCheckpointUuid: str
    endReason: str | None
    runnerState: str
    bestValidation: MetricsWorkload | None = None
    latestValidation: MetricsWorkload | None = None
    bestCheckpoint: CheckpointWorkload | None = None
    waitReason: str | None = None


class GetTrialResponse(WireModel):
    trial: Trial


class WorkloadContainer(WireModel):
    """v1WorkloadContainer: exactly one of the three is set."""

    training: MetricsWorkload | None = None
    validation: MetricsWorkload | None = None
    checkpoint: CheckpointWorkload | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> WorkloadContainer:
        if len(self.model_fields_set) != 1 or None in (getattr(self, k) for k in self.model_fields_set):
            raise ValueError("a workload is exactly one of training, validation and checkpoint")
        return self


class GetTrialWorkloadsResponse(WireModel):
    workloads: list[WorkloadContainer]
    pagination: Pagination


class TrialMetricsReport(WireModel):
    """pedl's own: one report of GET /api/v1/trials/{id}/metrics."""

    group: str
    stepsCompleted: int
    trialRunId: int
    reportTime: str
    metrics: dict[str, Any]


class GetTrialMetricsResponse(WireModel):
    metrics: list[TrialMetricsReport]


class DataPoint(WireModel):
    """v1DataPoint: the values of a step's report; pedl keeps no epoch."""

    batches: int
    time: str
    values: dict[str, Any]
    epoch: int | None


MetricType = Literal[
    "METRIC_TYPE_TRAINING", "METRIC_TYPE_VALIDATION", "METRIC_TYPE_PROFILING", "METRIC_TYPE_UNSPECIFIED"
]


class DownsampledMetrics(WireModel):
    """v1DownsampledMetrics: one group's series (type METRIC_TYPE_UNSPECIFIED for a group of pedl's own)."""

    group: str
    type: MetricType
    data: list[DataPoint]


class ComparableTrial(WireModel):
    trial: Trial
    metrics: list[DownsampledMetrics]


class CompareTrialsResponse(WireModel):
    trials: list[ComparableTrial]
