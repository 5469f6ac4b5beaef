"""Checkpoints reported by trials: record, get, list, and the validation metrics at their steps."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from sqlalchemy import func, select
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


def list_page(s: Session, *, experiment_id: int | None = None, trial_id: int | None = None,
              states: list[str] | None = None, offset: int = 0, limit: int = 0,
              newest_first: bool = False) -> tuple[list[models.Checkpoint], int]:
    """Checkpoints matching the filters, oldest report first (or newest), and how many match."""
    q = select(models.Checkpoint)
    if experiment_id is not None:
        q = q.where(models.Checkpoint.experiment_id == experiment_id)
    if trial_id is not None:
        q = q.where(models.Checkpoint.trial_id == trial_id)
    if states:
        q = q.where(models.Checkpoint.state.in_(states))
    total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
    order = (models.Checkpoint.report_time.desc(), models.Checkpoint.uuid.desc()) if newest_first else (
        models.Checkpoint.report_time, models.Checkpoint.uuid)
    rows = list(s.scalars(q.order_by(*order).offset(offset).limit(limit if limit > 0 else None)))
    return rows, total


def validations_at(s: Session, points: Iterable[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The validation metrics reported at each (trial id, steps_completed), in one query."""
    points = set(points)
    if not points:
        return {}
    rows = s.execute(select(models.Metric.trial_id, models.Metric.steps_completed, models.Metric.metrics)
                     .where(models.Metric.trial_id.in_({t for t, _ in points}), models.Metric.group == "validation",
                            models.Metric.steps_completed.in_({n for _, n in points}))
                     .order_by(models.Metric.id))
    return {(t, n): m for t, n, m in rows if (t, n) in points}  # the latest report of a step wins


def with_training(s: Session, rows: list[models.Checkpoint]) -> list[
        tuple[models.Checkpoint, models.Experiment | None, models.Trial | None, dict[str, Any] | None]]:
    """Each checkpoint with its experiment, trial and validation metrics, loaded in three queries."""
    trial_ids = {c.trial_id for c in rows if c.trial_id is not None}
    exp_ids = {c.experiment_id for c in rows if c.experiment_id is not None}
    trials = {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids)))} if trial_ids else {}
    exps = {e.id: e for e in s.scalars(select(models.Experiment).where(models.Experiment.id.in_(exp_ids)))} \
        if exp_ids else {}
    validations = validations_at(s, [(c.trial_id, c.steps_completed) for c in rows if c.trial_id is not None])
    return [(c, exps.get(c.experiment_id) if c.experiment_id is not None else None,
             trials.get(c.trial_id) if c.trial_id is not None else None,
             validations.get((c.trial_id, c.steps_completed)) if c.trial_id is not None else None) for c in rows]
