"""Checkpoints reported by trials."""

from __future__ import annotations

import contextlib
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument, NotFound
from pedl.master.db import models


def record(s: Session, *, uuid: str, trial: models.Trial | None, alloc_id: str | None, task_id: str | None,
           report_time: float, metadata: dict[str, Any], resources: dict[str, Any], storage: dict[str, Any],
           state: str = "STATE_COMPLETED") -> models.Checkpoint:
    existing = s.get(models.Checkpoint, uuid)
    if existing is not None:  # a retried report (tasks retry POSTs on connection errors)
        if existing.trial_id != (trial.id if trial else None):
            raise InvalidArgument(f"checkpoint.uuid: {uuid} was already reported by another trial",
                                  fields=[{"field": "checkpoint.uuid", "message": "duplicate"}])
        return existing
    steps = metadata.get("steps_completed", 0)
    try:
        steps = int(steps)
    except (TypeError, ValueError):
        raise InvalidArgument("checkpoint.metadata.steps_completed: must be an integer",
                              fields=[{"field": "checkpoint.metadata.steps_completed", "message": "not an integer"}]) from None
    size = 0
    for v in resources.values():
        with contextlib.suppress(TypeError, ValueError):
            size += int(v)
    ckpt = models.Checkpoint(uuid=uuid, trial_id=trial.id if trial else None,
                             experiment_id=trial.experiment_id if trial else None, task_id=task_id,
                             allocation_id=alloc_id, state=state, report_time=report_time, steps_completed=steps,
                             meta=metadata, resources=resources, storage=storage, size_bytes=size)
    s.add(ckpt)
    if trial is not None and state == "STATE_COMPLETED":
        latest = s.get(models.Checkpoint, trial.latest_checkpoint) if trial.latest_checkpoint else None
        if latest is None or steps >= latest.steps_completed:
            trial.latest_checkpoint = uuid
    return ckpt


def get(s: Session, uuid: str) -> models.Checkpoint:
    ckpt = s.get(models.Checkpoint, uuid)
    if ckpt is None:
        raise NotFound(f"checkpoint {uuid} not found")
    return ckpt


def for_experiment(s: Session, experiment_id: int) -> list[models.Checkpoint]:
    return list(s.scalars(select(models.Checkpoint).where(models.Checkpoint.experiment_id == experiment_id)
                          .order_by(models.Checkpoint.report_time)))


def validation_metrics_at(s: Session, trial_id: int, steps: int) -> dict[str, Any] | None:
    row = s.scalar(select(models.Metric).where(models.Metric.trial_id == trial_id, models.Metric.group == "validation",
                                               models.Metric.steps_completed == steps).order_by(models.Metric.id.desc()))
    return row.metrics if row else None
