"""Checkpoints reported by trials: register (only from the trial's own task token, stored where its
experiment's storage says), get, list, locate for download, and the validation metrics at their steps."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import experiment_storage
from pedl.errors import Conflict, Forbidden, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints import download as checkpoint_download
from pedl.master.checkpoints import to_wire
from pedl.master.checkpoints.storage_roots import allowed_roots, is_path_component, location_problem
from pedl.master.db import models
from pedl.master.lifecycle.checkpoint_gc_holds import not_served
from pedl.master.lifecycle.states import DELETING_EXPERIMENT, CheckpointState
from pedl.master.lifecycle.task_access import require_task
from pedl.master.wire.checkpoint import Checkpoint

if TYPE_CHECKING:
    from pedl.config.master_config import MasterConfig
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)
REPORTED_AT_START = 20  # legacy checkpoints outside the roots listed one per line; the rest are counted


def register(
    s: Session,
    who: Caller,
    *,
    uuid: str,
    now: float,
    metadata: dict[str, Any],
    resources: dict[str, int],
    state: str,
    trial_id: int | None = None,
    allocation_id: str | None = None,
    task_id: str | None = None,
) -> tuple[models.Checkpoint, models.Experiment, models.Trial]:
    """Record a checkpoint reported by a running trial. Only the task token of that trial's live
    allocation may (the ids the body names, if any, must be its own); the files are where the
    experiment's checkpoint_storage says, never where a request says."""
    alloc = require_task(s, who, trial_id=trial_id, allocation_id=allocation_id, task_id=task_id)
    trial = s.get(models.Trial, alloc.trial_id) if alloc.trial_id is not None else None
    exp = s.get(models.Experiment, trial.experiment_id) if trial is not None else None
    if trial is None or exp is None:
        raise Forbidden(f"allocation {alloc.id} runs no trial; only trials report checkpoints")
    row = record(
        s,
        uuid=uuid,
        trial=trial,
        alloc_id=alloc.id,
        task_id=alloc.task_id,
        report_time=now,
        metadata=metadata,
        resources=resources,
        storage=experiment_storage(exp.config),
        state=state,
    )
    return row, exp, trial


def record(
    s: Session,
    *,
    uuid: str,
    trial: models.Trial | None,
    alloc_id: str | None,
    task_id: str | None,
    report_time: float,
    metadata: dict[str, Any],
    resources: dict[str, Any],
    storage: dict[str, Any],
    state: str = "STATE_COMPLETED",
) -> models.Checkpoint:
    existing = s.get(models.Checkpoint, uuid)
    if existing is not None:  # a retried report (tasks retry POSTs on connection errors)
        if existing.trial_id != (trial.id if trial else None):
            raise InvalidArgument(
                f"checkpoint.uuid: {uuid} was already reported by another trial",
                fields=[{"field": "checkpoint.uuid", "message": "duplicate"}],
            )
        return existing
    steps = metadata.get("steps_completed", 0)
    try:
        steps = int(steps)
    except (TypeError, ValueError):
        raise InvalidArgument(
            "checkpoint.metadata.steps_completed: must be an integer",
            fields=[{"field": "checkpoint.metadata.steps_completed", "message": "not an integer"}],
        ) from None
    size = sum(int(v) for v in resources.values())
    ckpt = models.Checkpoint(
        uuid=uuid,
        trial_id=trial.id if trial else None,
        experiment_id=trial.experiment_id if trial else None,
        task_id=task_id,
        allocation_id=alloc_id,
        state=state,
        report_time=report_time,
        steps_completed=steps,
        meta=metadata,
        resources=resources,
        storage=storage,
        size_bytes=size,
    )
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
    return list(
        s.scalars(
            select(models.Checkpoint)
            .where(models.Checkpoint.experiment_id == experiment_id)
            .order_by(models.Checkpoint.report_time)
        )
    )


def validation_metrics_at(s: Session, trial_id: int, steps: int) -> dict[str, Any] | None:
    row = s.scalar(
        select(models.Metric)
        .where(
            models.Metric.trial_id == trial_id,
            models.Metric.group == "validation",
            models.Metric.steps_completed == steps,
        )
        .order_by(models.Metric.id.desc())
    )
    return row.metrics if row else None


def list_page(
    s: Session,
    *,
    experiment_id: int | None = None,
    trial_id: int | None = None,
    states: list[str] | None = None,
    offset: int = 0,
    limit: int = 0,
    newest_first: bool = False,
) -> tuple[list[models.Checkpoint], int]:
    """Checkpoints matching the filters, oldest report first (or newest), and how many match."""
    q = select(models.Checkpoint)
    if experiment_id is not None:
        q = q.where(models.Checkpoint.experiment_id == experiment_id)
    if trial_id is not None:
        q = q.where(models.Checkpoint.trial_id == trial_id)
    if states:
        q = q.where(models.Checkpoint.state.in_(states))
    total = s.scalar(select(func.count()).select_from(q.subquery())) or 0
    order = (
        (models.Checkpoint.report_time.desc(), models.Checkpoint.uuid.desc())
        if newest_first
        else (models.Checkpoint.report_time, models.Checkpoint.uuid)
    )
    rows = list(s.scalars(q.order_by(*order).offset(offset).limit(limit if limit > 0 else None)))
    return rows, total


def validations_at(s: Session, points: Iterable[tuple[int, int]]) -> dict[tuple[int, int], dict[str, Any]]:
    """The validation metrics reported at each (trial id, steps_completed), in one query."""
    points = set(points)
    if not points:
        return {}
    rows = s.execute(
        select(models.Metric.trial_id, models.Metric.steps_completed, models.Metric.metrics)
        .where(
            models.Metric.trial_id.in_({t for t, _ in points}),
            models.Metric.group == "validation",
            models.Metric.steps_completed.in_({n for _, n in points}),
        )
        .order_by(models.Metric.id)
    )
    return {(t, n): m for t, n, m in rows if (t, n) in points}  # the latest report of a step wins


@dataclass(frozen=True)
class Trained:
    """A checkpoint with what its wire form shows of its training: its experiment, its trial and the
    validation metrics reported at its step (None for a checkpoint of no trial)."""

    checkpoint: models.Checkpoint
    experiment: models.Experiment | None
    trial: models.Trial | None
    validation: dict[str, Any] | None

    def wire(self) -> Checkpoint:
        return to_wire.checkpoint(self.checkpoint, self.experiment, self.trial, self.validation)


def with_training(s: Session, rows: list[models.Checkpoint]) -> list[Trained]:
    """Each checkpoint with its experiment, trial and validation metrics, loaded in three queries."""
    trial_ids = {c.trial_id for c in rows if c.trial_id is not None}
    exp_ids = {c.experiment_id for c in rows if c.experiment_id is not None}
    trials = (
        {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids)))} if trial_ids else {}
    )
    exps = (
        {e.id: e for e in s.scalars(select(models.Experiment).where(models.Experiment.id.in_(exp_ids)))}
        if exp_ids
        else {}
    )
    validations = validations_at(s, [(c.trial_id, c.steps_completed) for c in rows if c.trial_id is not None])
    return [
        Trained(
            c,
            exps.get(c.experiment_id) if c.experiment_id is not None else None,
            trials.get(c.trial_id) if c.trial_id is not None else None,
            validations.get((c.trial_id, c.steps_completed)) if c.trial_id is not None else None,
        )
        for c in rows
    ]


def shown(s: Session, rows: list[models.Checkpoint]) -> list[Checkpoint]:
    """The checkpoints as the API sends them (with_training's queries)."""
    return [t.wire() for t in with_training(s, rows)]


# -- where a checkpoint's files are ----------------------------------------------------------------


@dataclass(frozen=True)
class Located:
    """What download needs of a checkpoint, read in one short transaction."""

    uuid: str
    report_time: float
    storage: dict[str, Any]  # the experiment's checkpoint_storage: where the files are
    recorded: dict[str, Any]  # the row's storage column (older rows: from the request)


def locate(s: Session, uuid: str, default_storage: dict[str, Any]) -> Located:
    """A checkpoint that still has files, and its experiment's storage (`default_storage`, the
    master's, for an experiment config without one). NotFound when it is unknown or deleted;
    Conflict while its files are being deleted (checkpoint_gc_holds, or its experiment's deletion);
    Forbidden when it belongs to no experiment (only a request said where its files were)."""
    c = get(s, uuid)
    if c.state == CheckpointState.DELETED:
        raise NotFound(f"checkpoint {uuid} was deleted (STATE_DELETED); its files are gone")
    why = not_served(c)
    if why is not None:
        raise Conflict(why)
    exp = s.get(models.Experiment, c.experiment_id) if c.experiment_id is not None else None
    if exp is None:
        raise Forbidden(
            f"checkpoint {uuid} is not served: it belongs to no experiment, so the master does not "
            "know where its files are"
        )
    if exp.state in DELETING_EXPERIMENT:  # experiments/deletion.py deletes its files, then its rows
        raise Conflict(f"checkpoint {uuid} is not served: its experiment {exp.id} is being deleted ({exp.state})")
    return Located(c.uuid, c.report_time, experiment_storage(exp.config, default_storage), dict(c.storage or {}))


def outside_roots(s: Session, config: MasterConfig) -> Iterator[tuple[str, str]]:
    """(uuid, why) of each checkpoint with files (not deleted) whose experiment's storage, recorded
    storage or uuid lies outside the master's storage roots: rows stored before the roots were
    enforced. Judged from the configs alone; each distinct pair of storages is resolved once."""
    roots = allowed_roots(config)
    default = config.effective_checkpoint_storage().model_dump(mode="json")
    live = models.Checkpoint.state != CheckpointState.DELETED
    exp_ids = select(models.Checkpoint.experiment_id).where(live).distinct().scalar_subquery()
    exp_configs = dict(
        s.execute(select(models.Experiment.id, models.Experiment.config).where(models.Experiment.id.in_(exp_ids))).all()
    )
    verdicts: dict[tuple[str, str], str | None] = {}
    rows = s.execute(
        select(models.Checkpoint.uuid, models.Checkpoint.experiment_id, models.Checkpoint.storage)
        .where(live)
        .order_by(models.Checkpoint.report_time, models.Checkpoint.uuid)
    )
    for uuid, exp_id, recorded in rows:
        exp_config = exp_configs.get(exp_id) if exp_id is not None else None
        if exp_config is not None:
            storage = experiment_storage(exp_config, default)
        elif recorded:  # no experiment: only the request said where its files were
            storage = dict(recorded)
        else:
            continue
        key = (
            json.dumps(storage, sort_keys=True, default=str),
            json.dumps(recorded or {}, sort_keys=True, default=str),
        )
        if key not in verdicts:
            verdicts[key] = location_problem(storage, "uuid", roots, recorded=recorded)
        why = verdicts[key]
        if why is None and not is_path_component(uuid):
            why = f"its uuid {uuid!r} is not a single path component"
        if why is not None:
            yield uuid, why


def report_outside_roots(ctx: MasterContext) -> int:
    """Warn, at master start, about checkpoints stored outside the storage roots (garbage collection
    and download leave them alone); returns how many there are."""
    with ctx.db.read_session() as s:
        found = list(outside_roots(s, ctx.config))
    for uuid, why in found[:REPORTED_AT_START]:
        log.warning(
            "checkpoint %r lies outside the checkpoint storage roots and will be neither deleted nor served: %s",
            uuid,
            why,
        )
    if len(found) > REPORTED_AT_START:
        log.warning(
            "%d more checkpoints lie outside the checkpoint storage roots (the first %d are listed above)",
            len(found) - REPORTED_AT_START,
            REPORTED_AT_START,
        )
    return len(found)


# -- what the routers call (each opens its own session) ---------------------------------------------


@dataclass(frozen=True)
class Page:
    """One page of checkpoints as the API sends them, and how many match."""

    items: list[Checkpoint]
    total: int


def report(
    ctx: MasterContext,
    who: Caller,
    *,
    uuid: str,
    metadata: dict[str, Any],
    resources: dict[str, int],
    state: str,
    trial_id: int | None,
    allocation_id: str | None,
    task_id: str | None,
) -> Checkpoint:
    """A trial reports a checkpoint it stored; only its own task token may."""
    with ctx.db.session() as s:
        row, exp, trial = register(
            s,
            who,
            uuid=uuid,
            now=ctx.clock.now(),
            metadata=metadata,
            resources=resources,
            state=state,
            trial_id=trial_id,
            allocation_id=allocation_id,
            task_id=task_id,
        )
        return to_wire.checkpoint(row, exp, trial, None)


def describe(ctx: MasterContext, uuid: str) -> Checkpoint:
    with ctx.db.session() as s:
        c = get(s, uuid)
        trial = s.get(models.Trial, c.trial_id) if c.trial_id else None
        exp = s.get(models.Experiment, c.experiment_id) if c.experiment_id else None
        validation = validation_metrics_at(s, c.trial_id, c.steps_completed) if c.trial_id else None
        return to_wire.checkpoint(c, exp, trial, validation)


def listing(
    ctx: MasterContext,
    *,
    experiment_id: int | None,
    trial_id: int | None,
    states: list[str],
    offset: int,
    limit: int,
    newest_first: bool,
) -> Page:
    """One page of checkpoints and the total that match."""
    with ctx.db.session() as s:
        rows, total = list_page(
            s,
            experiment_id=experiment_id,
            trial_id=trial_id,
            states=states,
            offset=offset,
            limit=limit,
            newest_first=newest_first,
        )
        return Page(shown(s, rows), total)


@dataclass(frozen=True)
class Download:
    """A checkpoint's files as an uncompressed tar: its chunks and sizes."""

    uuid: str
    chunks: Iterator[bytes]
    length: int
    file_bytes: int


def download(ctx: MasterContext, uuid: str) -> Download:
    """The checkpoint's files, streamed from its storage (shared_fs or s3), only from inside the
    master's checkpoint storage roots. The row is read in one short transaction, before streaming."""
    with ctx.db.session() as s:
        where = locate(s, uuid, ctx.config.effective_checkpoint_storage().model_dump(mode="json"))
    ready = checkpoint_download.prepare(
        where.uuid, where.storage, allowed_roots(ctx.config), report_time=where.report_time, recorded=where.recorded
    )
    tar = ready.tar
    return Download(
        where.uuid, checkpoint_download.tar_stream(ready.storage, where.uuid, tar), tar.length, tar.file_bytes
    )
