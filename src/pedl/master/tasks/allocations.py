"""Allocations as tasks see them: the model definition a task downloads, the logs it posts, and
its preemption signal. Each call takes the task token of that live allocation."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from pedl.errors import Forbidden, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.states import LIVE_ALLOCATION
from pedl.master.lifecycle.task_access import require_task
from pedl.master.tasks import model_definitions, to_wire
from pedl.master.wire.task import AllocationSummary

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

PREEMPTION_POLL_SECONDS = 0.2


def live_summaries(ctx: MasterContext) -> dict[str, AllocationSummary]:
    """Allocation id -> summary, of each allocation not yet ended."""
    with ctx.db.read_session() as s:
        allocs = list(s.scalars(select(models.Allocation).where(models.Allocation.state.in_(LIVE_ALLOCATION))))
        agents = {a.id: a for a in s.scalars(select(models.Agent))}
        return {a.id: to_wire.allocation_summary(a, agents) for a in allocs}


def context_directory(ctx: MasterContext, who: Caller, task_id: str) -> bytes:
    """The gzipped model definition of the task's experiment (a generic task's own files), for that
    task only."""
    with ctx.db.read_session() as s:
        trial = s.scalar(select(models.Trial).where(models.Trial.task_id == task_id))
        generic = s.get(models.GenericTask, task_id) if trial is None and len(task_id) <= 128 else None
        if trial is None and generic is None:
            raise NotFound(f"task {task_id} not found")
        require_task(s, who, task_id=task_id)
        if trial is None:  # a generic task's (one of the two is there)
            return (generic.context if generic is not None else None) or b""
        md = s.get(models.ModelDefinition, trial.experiment_id)
        return md.archive if md else b""


def context_b64(ctx: MasterContext, who: Caller, task_id: str) -> str:
    archive = context_directory(ctx, who, task_id)
    return model_definitions.b64_tgz(archive) if archive else ""


def post_logs(ctx: MasterContext, who: Caller, entries: list[dict[str, Any]]) -> None:
    """Lines a task posts itself (Determined's POST /task/logs), all for its own task."""
    with ctx.db.session() as s:
        alloc = require_task(s, who)
        foreign = sorted({e["taskId"] for e in entries} - {alloc.task_id})
        if foreign:
            raise Forbidden(f"this task's token cannot post logs for task(s) {', '.join(foreign[:5])}")
        now = ctx.clock.now()
        lines = [(now, str(e.get("level") or "LOG_LEVEL_INFO"), str(e.get("log", ""))) for e in entries]
        logs.add_api_lines(s, alloc.task_id, alloc.trial_id, lines)


def _own_allocation(s: Session, who: Caller, allocation_id: str) -> models.Allocation:
    if s.get(models.Allocation, allocation_id) is None:
        raise NotFound(f"allocation {allocation_id} not found")
    return require_task(s, who, allocation_id=allocation_id)


def _check_own_allocation(ctx: MasterContext, who: Caller, allocation_id: str) -> None:
    with ctx.db.read_session() as s:
        _own_allocation(s, who, allocation_id)


async def wait_preemption(
    ctx: MasterContext, who: Caller, allocation_id: str, timeout_seconds: int, disconnected
) -> bool:  # an async () -> bool
    """Long poll: True as soon as the allocation is asked to checkpoint and leave."""
    await run_in_threadpool(_check_own_allocation, ctx, who, allocation_id)
    ctl = ctx.controller
    # a long poll waits in real time, whatever clock the master's decisions run on
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not ctl.should_preempt(allocation_id):
        if loop.time() >= deadline or await disconnected():
            break
        await asyncio.sleep(PREEMPTION_POLL_SECONDS)
    return ctl.should_preempt(allocation_id)


def ack_preemption(ctx: MasterContext, who: Caller, allocation_id: str) -> None:
    """det's client acknowledges a preemption; the master only checks the allocation is the caller's
    own (nothing depends on the acknowledgement)."""
    with ctx.db.session() as s:
        _own_allocation(s, who, allocation_id)
