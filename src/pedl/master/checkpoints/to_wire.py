"""Checkpoint rows as Determined's v1Checkpoint (docs/det-wire.md §4): its files with their sizes as
strings, its training metadata, and the number Determined would give its storage config."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pedl.config.checkpoint_storage import as_determined
from pedl.master.wire.base import ts
from pedl.master.wire.checkpoint import AvgMetrics, Checkpoint, CheckpointTrainingMetadata

if TYPE_CHECKING:
    from pedl.master.db import models


def checkpoint_files(c: models.Checkpoint) -> dict[str, str]:
    """The checkpoint's files and sizes (int64 as strings). A DELETED one keeps listing the files it
    last had, as Determined's does (det's e2e test_checkpoint_partial_delete expects them); its state
    says they are gone (det and the WebUI download only COMPLETED and PARTIALLY_DELETED ones, and the
    master serves what storage holds) and it counts in no checkpoint size."""
    return {k: str(v) for k, v in (c.resources or {}).items()}


def storage_id(storage: dict[str, Any] | None) -> int:
    """Determined numbers each distinct checkpoint storage config (a row of its own); pedl keeps the
    config on the checkpoint, so the same config always gets the same positive 31-bit number."""
    text = json.dumps(storage or {}, sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1 or 1


def training(
    exp: models.Experiment | None, t: models.Trial | None, validation: dict[str, Any] | None
) -> CheckpointTrainingMetadata:
    """What the checkpoint's trial was: nothing for a checkpoint of no trial; searcherMetric only where
    the validation at its step has the searcher's metric."""
    if t is None or exp is None:
        return CheckpointTrainingMetadata()
    out = CheckpointTrainingMetadata(
        trialId=t.id,
        experimentId=exp.id,
        experimentConfig=as_determined(exp.config),
        hparams=t.hparams,
        trainingMetrics=AvgMetrics(avgMetrics={}),
        validationMetrics=AvgMetrics(avgMetrics=validation or {}),
    )
    metric_name = exp.config.get("searcher", {}).get("metric")
    if validation and metric_name in validation:
        out.searcherMetric = validation[metric_name]  # set, so sent even when the value is null
    return out


def checkpoint(
    c: models.Checkpoint, exp: models.Experiment | None, t: models.Trial | None, validation: dict[str, Any] | None
) -> Checkpoint:
    """The checkpoint with its experiment, trial and the validation metrics reported at its step."""
    meta = dict(c.meta or {})
    meta.setdefault("steps_completed", c.steps_completed)
    return Checkpoint(
        uuid=c.uuid,
        state=c.state,
        deleting=c.deleting_by is not None,
        metadata=meta,
        resources=checkpoint_files(c),
        training=training(exp, t, validation),
        reportTime=ts(c.report_time) or "",
        taskId=c.task_id or "",
        allocationId=c.allocation_id or "",
        storage=c.storage,
        storageId=storage_id(c.storage),
    )
