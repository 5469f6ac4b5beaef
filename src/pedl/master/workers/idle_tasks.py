"""Ends notebooks and TensorBoards left unused for their idle_timeout. `decide` is pure (the
time comes in); the worker reads the running services, kills those it names, and sleeps until the
next one could fall idle (at most CHECK_SECONDS).

A service's idle clock runs from its last use (tasks/activity.py), and never from before its
service answered (registering the port counts as a use): time spent queued or starting is not idle."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.durations import format_duration, parse_duration
from pedl.master.db import models
from pedl.master.lifecycle import allocations as cluster_allocations
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.states import AllocationState
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

G = models.GenericTask
ALLOC = models.Allocation
CHECK_SECONDS = 5.0  # the longest the worker sleeps: a task launched meanwhile waits at most this long more
MIN_SPACING = 0.5
MAX_CHECKED = 10_000  # services read per pass, the longest unused first (bounded work)
# the kinds whose use the master sees (relayed HTTP and WebSocket, a notebook's own reports), as
# Determined's idle_timeout; a shell's SSH sessions pass no relay that could say it is in use
IDLE_KINDS = ("notebook", "tensorboard")


@dataclass(frozen=True)
class IdleView:
    """What the decision needs of a running service."""

    task_id: str
    allocation_id: str
    kind: str
    idle_timeout: float  # seconds
    last_used: float  # its last use, or when its service first answered


@dataclass(frozen=True)
class IdleKill:
    task_id: str
    allocation_id: str
    reason: str


def reason(kind: str, idle_for: float, idle_timeout: float) -> str:
    return f"{kind} idle for {format_duration(max(1, round(idle_for)))} (idle_timeout {format_duration(idle_timeout)})"


def decide(now: float, views: Iterable[IdleView]) -> tuple[list[IdleKill], float | None]:
    """The services idle for at least their idle_timeout at `now`, and when the next of the others
    would be (None: none has a clock running)."""
    kills: list[IdleKill] = []
    next_at: float | None = None
    for v in views:
        deadline = v.last_used + v.idle_timeout
        if now >= deadline:
            kills.append(IdleKill(v.task_id, v.allocation_id, reason(v.kind, now - v.last_used, v.idle_timeout)))
        elif next_at is None or deadline < next_at:
            next_at = deadline
    return kills, next_at


def idle_timeout_of(config: Any) -> float | None:
    """The task's idle_timeout in seconds, from its stored config (None: none, or one that does not read)."""
    value = config.get("idle_timeout") if isinstance(config, dict) else None
    if not value:
        return None
    try:
        seconds = parse_duration(value)
    except ValueError:
        return None
    return seconds or None


def _view(task: Any, alloc: Any) -> IdleView | None:
    timeout = idle_timeout_of(task.config)
    if timeout is None or alloc.proxy_port is None:
        return None
    last = max(task.last_activity or 0.0, alloc.started_at or 0.0)
    return IdleView(task.id, alloc.id, task.kind, timeout, last)


def running_services(s: Session) -> list[IdleView]:
    rows = s.execute(
        select(G, ALLOC)
        .join(ALLOC, ALLOC.task_id == G.id)
        .where(
            G.kind.in_(IDLE_KINDS),
            ALLOC.state == AllocationState.RUNNING,
            ALLOC.trial_id.is_(None),
            ALLOC.proxy_port.is_not(None),
        )
        .order_by(G.last_activity)
        .limit(MAX_CHECKED)
    ).all()
    return [v for task, alloc in rows if (v := _view(task, alloc)) is not None]


def check(ctx: MasterContext) -> float | None:
    """One pass: kill the services idle for their idle_timeout; returns when the next could be."""
    with ctx.db.read_session() as s:
        views = running_services(s)
    kills, next_at = decide(ctx.clock.now(), views)
    if not kills:
        return next_at

    def work(s: Session) -> None:
        now = ctx.controller.now
        for kill in kills:
            task, alloc = s.get(G, kill.task_id), s.get(ALLOC, kill.allocation_id)
            if task is None or alloc is None or alloc.state != AllocationState.RUNNING:
                continue
            view = _view(task, alloc)
            # used since the read: the fresh row decides
            fresh = decide(now, [view])[0] if view is not None else []
            if not fresh:
                continue
            logs.add_master_line(s, now, alloc, f"pedl: {fresh[0].reason}: killing it")
            cluster_allocations.kill(ctx.controller, s, alloc, fresh[0].reason)

    ctx.controller.run(work)
    ctx.controller.wake()
    return next_at


async def run_loop(ctx: MasterContext, stop: asyncio.Event) -> None:
    """The master's idle worker (app.py starts it with the others)."""
    while not stop.is_set():
        try:
            next_at = await run_pass(check, ctx)
        except Exception:  # keep the worker alive; the next pass retries
            log.exception("idle task pass failed")
            next_at = None
        delay = CHECK_SECONDS
        if next_at is not None:
            delay = min(max(next_at - ctx.clock.now(), MIN_SPACING), CHECK_SECONDS)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=delay)
