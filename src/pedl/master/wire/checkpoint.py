"""Determined's v1Checkpoint with its training metadata, and the answers of the routes that send
checkpoints: one by uuid, the pages of a listing, an experiment's and a trial's."""

from __future__ import annotations

from typing import Any

from pedl.master.wire.base import Pagination, WireModel


class AvgMetrics(WireModel):
    """v1Metrics as a checkpoint's training metadata carries it: the averages only (no batchMetrics)."""

    avgMetrics: dict[str, Any]


class CheckpointTrainingMetadata(WireModel):
    """v1CheckpointTrainingMetadata: sent as `{}` for a checkpoint of no trial, every field left out."""

    trialId: int | None = None
    experimentId: int | None = None
    experimentConfig: dict[str, Any] | None = None  # the config in Determined's shape (checkpoint_storage's)
    hparams: dict[str, Any] | None = None
    trainingMetrics: AvgMetrics | None = None
    validationMetrics: AvgMetrics | None = None
    # the searcher's metric at the checkpoint's step, as the trial reported it (any JSON value); left
    # out when that validation has none
    searcherMetric: Any = None


class Checkpoint(WireModel):
    """v1Checkpoint, plus pedl's own `deleting` (its files are being deleted, so it is not served) and
    `storage` (the checkpoint storage config its files are in)."""

    uuid: str
    state: str  # checkpointv1State's name (pedl's lifecycle.states.CheckpointState)
    deleting: bool
    metadata: dict[str, Any]  # always holds steps_completed
    resources: dict[str, str]  # relative path -> bytes (int64 as a string)
    training: CheckpointTrainingMetadata
    reportTime: str
    taskId: str
    allocationId: str
    storage: dict[str, Any]
    storageId: int


class GetCheckpointResponse(WireModel):
    checkpoint: Checkpoint


class ReportCheckpointResponse(WireModel):
    """pedl answers a reported checkpoint with it as stored (Determined's answer is empty)."""

    checkpoint: Checkpoint


class PostCheckpointMetadataResponse(WireModel):
    checkpoint: Checkpoint


class GetCheckpointsResponse(WireModel):
    """pedl's own listing across experiments."""

    checkpoints: list[Checkpoint]
    pagination: Pagination


class GetExperimentCheckpointsResponse(WireModel):
    checkpoints: list[Checkpoint]
    pagination: Pagination


class GetTrialCheckpointsResponse(WireModel):
    checkpoints: list[Checkpoint]
    pagination: Pagination


class DeleteCheckpointsResponse(WireModel):
    """Empty: the checkpoints are STATE_DELETED when it comes."""


class CheckpointsRemoveFilesResponse(WireModel):
    """Empty: the files the globs named are gone when it comes."""
