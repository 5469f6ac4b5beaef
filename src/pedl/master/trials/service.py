"""Trial queries: describe, workloads (metrics and checkpoints in step order), metrics, logs, kill."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import NotFound
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints import totals as checkpoint_totals
from pedl.master.db import models
from pedl.master.db.base import existing
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle import allocations, progression
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import TERMINAL_TRIAL, AllocationState, TrialState
from pedl.master.lifecycle.transitions import set_trial_state
from pedl.master.metrics import service as metrics
from pedl.master.trials import to_wire
from pedl.master.wire.trial import Trial, TrialMetricsReport, WorkloadContainer

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def get(s: Session, trial_id: int) -> models.Trial:
    trial = s.get(models.Trial, trial_id)
    if trial is None:
        raise NotFound(f"trial {trial_id} not found")
    return trial


def best_and_latest_validation(s: Session, trial: models.Trial) -> tuple[models.Metric | None, models.Metric | None]:
    rows = list(
        s.scalars(
            select(models.Metric)
            .where(models.Metric.trial_id == trial.id, models.Metric.group == "validation")
            .order_by(models.Metric.steps_completed)
        )
    )
    if not rows:
        return None, None
    exp = s.get(models.Experiment, trial.experiment_id)
    sc = exp.config.get("searcher", {}) if exp else {}
    name, smaller = sc.get("metric"), sc.get("smaller_is_better", True)
    if name is None:
        return None, rows[-1]
    scored = [r for r in rows if isinstance(r.metrics.get(name), int | float)]
    best = (min if smaller else max)(scored, key=lambda r: r.metrics[name]) if scored else None
    return best, rows[-1]


def best_checkpoint(s: Session, trial: models.Trial, best: models.Metric | None) -> models.Checkpoint | None:
    """The checkpoint taken at the best validation's step, else the latest one."""
    if best is not None:
        ckpt = s.scalar(
            select(models.Checkpoint).where(
                models.Checkpoint.trial_id == trial.id, models.Checkpoint.steps_completed == best.steps_completed
            )
        )
        if ckpt is not None:
            return ckpt
    return s.get(models.Checkpoint, trial.latest_checkpoint) if trial.latest_checkpoint else None


def kill(fx: ClusterEffects, s: Session, trial_id: int) -> None:
    trial = get(s, trial_id)
    if trial.state in TERMINAL_TRIAL:
        return
    alloc = allocations.live_allocation(s, trial)
    if alloc is not None and alloc.state != AllocationState.PENDING:
        set_trial_state(s, fx.now, trial, TrialState.STOPPING_CANCELED, "trial killed by user")
        allocations.kill(fx, s, alloc, "trial killed by user")
        return
    if alloc is not None:
        allocations.kill(fx, s, alloc, "trial killed by user")
    set_trial_state(s, fx.now, trial, TrialState.CANCELED, "trial killed by user")
    trial.end_time = fx.now
    progression.close_early(fx, s, existing(s, models.Experiment, trial.experiment_id), trial, "killed")


def kill_by(ctx: MasterContext, who: Caller, trial_id: int) -> None:
    """A user kills one trial: its experiment's owner or an admin."""

    def run(s: Session) -> None:
        trial = get(s, trial_id)
        exp = existing(s, models.Experiment, trial.experiment_id)
        require_owner(who, exp.owner_id, f"kill trial {trial_id}")
        kill(ctx.controller, s, trial_id)

    ctx.controller.run(run)


# What the routers call: each opens its own session.


def describe(ctx: MasterContext, trial_id: int) -> Trial:
    """The trial with its best and latest validations, how many checkpoints it has and their bytes, its
    best one and why it waits (when queued)."""
    with ctx.db.session() as s:
        t = get(s, trial_id)
        best, latest = best_and_latest_validation(s, t)
        return to_wire.trial(
            t,
            best,
            latest,
            checkpoint_totals.of_trials(s, [t.id]).get(t.id, checkpoint_totals.NONE),
            best_checkpoint(s, t, best),
            wait_reasons(s, [t.id]).get(t.id),
        )


TRIAL_BYTES = 2048  # what a trial's v1Trial holds besides its summary metrics and hyperparameters, about


def within_bytes(rows: list[models.Trial], budget: int) -> list[models.Trial]:
    """The first of `rows` whose v1Trials fit in `budget` bytes (limits.max_listing_bytes), at least one: a page
    of trials whose summaries are large is cut short, and its pagination's endIndex tells the client where
    the next page starts (det's SDK and the WebUI page on by it)."""
    used = 0
    for i, t in enumerate(rows):
        used += TRIAL_BYTES + len(orjson.dumps(t.summary_metrics or {})) + len(orjson.dumps(t.hparams or {}))
        if used > budget and i:
            return rows[:i]
    return rows


def wait_reasons(s: Session, trial_ids: list[int]) -> dict[int, str]:
    """trial id -> why its queued allocation waits, for the trials that have one."""
    if not trial_ids:
        return {}
    rows = s.execute(
        select(models.Allocation.trial_id, models.Allocation.wait_reason).where(
            models.Allocation.trial_id.in_(trial_ids),
            models.Allocation.state == AllocationState.PENDING,
            models.Allocation.wait_reason.is_not(None),
        )
    )
    return {tid: why for tid, why in rows if tid is not None and why is not None}  # (as the query takes them)


@dataclass(frozen=True)
class WorkloadPage:
    items: list[WorkloadContainer]
    total: int  # the trial's workloads on every page


def _workload(row: models.Metric | models.Checkpoint) -> WorkloadContainer:
    if isinstance(row, models.Checkpoint):
        return WorkloadContainer(checkpoint=to_wire.checkpoint_workload(row))
    if row.group == "validation":
        return WorkloadContainer(validation=to_wire.metrics_workload(row))
    return WorkloadContainer(training=to_wire.metrics_workload(row))


def workloads(ctx: MasterContext, trial_id: int, offset: int, limit: int) -> WorkloadPage:
    """One page of the trial's metrics and checkpoints in step order (the checkpoint, validation,
    then training at each step), and how many there are. det's `experiment describe` merges a
    step's workloads into one row whose State is the first one's: a checkpoint or validation has
    one, training none, so they come first."""
    with ctx.db.session() as s:
        get(s, trial_id)
        items: list[tuple[int, int, models.Metric | models.Checkpoint]] = []
        for m in s.scalars(select(models.Metric).where(models.Metric.trial_id == trial_id)):
            items.append((m.steps_completed, 1 if m.group == "validation" else 2, m))
        for c in s.scalars(select(models.Checkpoint).where(models.Checkpoint.trial_id == trial_id)):
            items.append((c.steps_completed, 0, c))
        items.sort(key=lambda x: (x[0], x[1]))
        page = items[offset : offset + limit] if limit else items[offset:]
        return WorkloadPage([_workload(row) for _, _, row in page], len(items))


def metrics_of(ctx: MasterContext, trial_id: int, group: str | None) -> list[TrialMetricsReport]:
    with ctx.db.session() as s:
        get(s, trial_id)
        return [to_wire.metrics_report(m) for m in metrics.list_metrics(s, trial_id, group)]


def task_id_of(ctx: MasterContext, trial_id: int) -> str:
    """The trial's task id (its log lines are the task's); NotFound for an unknown trial."""
    with ctx.db.read_session() as s:
        return get(s, trial_id).task_id
