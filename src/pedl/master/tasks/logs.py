"""Tasks by their id (`det task logs`, GET /tasks/{id}): a trial's task, its allocations, and its log
lines filtered as det asks (allocations, agents, levels, sources, streams, time, text). Any stored
task id works: `{exp}.{uuid}` (Determined's shape, new trials) and the `{exp}.{trial}` of older ones. A user
follows a bounded number of streams at once (`follow_slot`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import NotFound
from pedl.master.db import models
from pedl.master.identity.user_slots import Bound, Slot
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.states import LIVE_ALLOCATION, TERMINAL_TRIAL
from pedl.master.tasks import to_wire
from pedl.master.trials.timeline import MAX_ALLOCATIONS
from pedl.master.wire.task import LogLine, Task

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


@dataclass(frozen=True)
class LogFilter:
    """Each list keeps lines whose value is in it (empty: any); times are seconds since the epoch."""

    allocation_ids: list[str] = field(default_factory=list)
    container_ids: list[str] = field(default_factory=list)  # pedl's container of an allocation is the allocation
    agent_ids: list[str] = field(default_factory=list)
    levels: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    stdtypes: list[str] = field(default_factory=list)
    after: float | None = None
    before: float | None = None
    text: str = ""
    no_lines: bool = False  # a filter no line can match (a rank: pedl records none)


def _task(s: Session, task_id: str) -> models.Trial | models.GenericTask:
    """The trial whose task this is, or the command, notebook, shell or TensorBoard of this id."""
    trial = s.scalar(select(models.Trial).where(models.Trial.task_id == task_id))
    if trial is not None:
        return trial
    generic = s.get(models.GenericTask, task_id) if len(task_id) <= 128 else None
    if generic is None:
        raise NotFound(f"task {task_id} not found")
    return generic


def _ended(s: Session, task_id: str) -> bool:
    """Whether the task is over (or gone): its trial has ended, or a generic task's allocation has."""
    trial = s.scalar(select(models.Trial).where(models.Trial.task_id == task_id))
    if trial is not None:
        return trial.state in TERMINAL_TRIAL
    return (
        s.scalar(
            select(models.Allocation.id)
            .where(models.Allocation.task_id == task_id, models.Allocation.state.in_(LIVE_ALLOCATION))
            .limit(1)
        )
        is None
    )


def describe(ctx: MasterContext, task_id: str) -> Task:
    """The task (a trial's, or a generic task) and its allocations, oldest first (the first MAX_ALLOCATIONS)."""
    with ctx.db.read_session() as s:
        trial = _task(s, task_id)
        allocs = list(
            s.scalars(
                select(models.Allocation)
                .where(models.Allocation.task_id == task_id)
                .order_by(models.Allocation.queued_at, models.Allocation.id)
                .limit(MAX_ALLOCATIONS)
            )
        )
        return to_wire.task(trial, allocs)


def require(ctx: MasterContext, task_id: str) -> None:
    """NotFound unless a task has this id."""
    with ctx.db.read_session() as s:
        _task(s, task_id)


@dataclass(frozen=True)
class LogBatch:
    lines: list[LogLine]
    cursor: int | None  # the id of the last line, to ask past
    done: bool  # the task had ended (or is gone) before the lines were read


def batch(
    ctx: MasterContext, task_id: str, flt: LogFilter, *, cursor: int | None, limit: int, newest_first: bool
) -> LogBatch:
    """Up to `limit` matching lines past `cursor` (the last id returned, None at first), the cursor
    after them, and whether the task has ended (or is gone), so a follower can stop."""
    q = select(models.TaskLog).where(models.TaskLog.task_id == task_id)
    if cursor is not None:
        q = q.where(models.TaskLog.id < cursor if newest_first else models.TaskLog.id > cursor)
    for column, values in (
        (models.TaskLog.allocation_id, flt.allocation_ids),
        (models.TaskLog.allocation_id, flt.container_ids),
        (models.TaskLog.agent_id, flt.agent_ids),
        (models.TaskLog.level, flt.levels),
        (models.TaskLog.source, flt.sources),
        (models.TaskLog.stdtype, flt.stdtypes),
    ):
        if values:  # in the query, so `limit` counts matching lines only
            q = q.where(column.in_(values))
    if flt.after is not None:
        q = q.where(models.TaskLog.timestamp > flt.after)
    if flt.before is not None:
        q = q.where(models.TaskLog.timestamp < flt.before)
    if flt.text:
        q = q.where(models.TaskLog.message.contains(logs.storable(flt.text), autoescape=True))  # as stored
    q = q.order_by(models.TaskLog.id.desc() if newest_first else models.TaskLog.id).limit(limit)
    with ctx.db.read_session() as s:
        # whether it had ended before the lines are read: a line written meanwhile is not lost
        done = _ended(s, task_id)
        rows = [] if flt.no_lines else list(s.scalars(q))
    return LogBatch([to_wire.log_line(r) for r in rows], rows[-1].id if rows else cursor, done)


def fields(ctx: MasterContext, task_id: str) -> dict[str, list]:
    """Determined's v1TaskLogsFieldsResponse: the distinct values of the task's lines that its log
    filters take (at most FIELD_VALUES each). pedl records no rank, so rankIds is empty."""
    L = models.TaskLog
    out: dict[str, list] = {"rankIds": []}
    with ctx.db.read_session() as s:
        _task(s, task_id)
        for key, column in (
            ("allocationIds", L.allocation_id),
            ("agentIds", L.agent_id),
            ("containerIds", L.allocation_id),
            ("sources", L.source),
            ("stdtypes", L.stdtype),
        ):
            out[key] = sorted(
                v
                for v in s.scalars(
                    select(column).where(L.task_id == task_id, column.is_not(None)).distinct().limit(FIELD_VALUES)
                )
                if v
            )
    return out


FIELD_VALUES = 100


def follow_slot(ctx: MasterContext, user_id: int) -> Slot:
    """One of the log streams a user may follow at once (limits.max_log_follows_per_user; past it a 429 naming
    the setting), held while the stream is open."""
    limit = ctx.config.limits.max_log_follows_per_user
    return ctx.log_follows.take(user_id, Bound(limit, "limits.max_log_follows_per_user"))
