"""A task's use, as the master learns it: POST /api/v1/allocations/{id}/activity (the task says it is
in use, with its own token), and `proxied`, which the proxy's HTTP and WebSocket relays call for each
request or message they pass to a task's service (throttled in memory: tasks/activity.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.tasks import ActivityThrottle
from pedl.master.tasks import activity as task_activity

router = APIRouter()


class ActivityBody(Body):
    idle: bool = False  # as Determined's notebook report_idle: false (the default) means in use


@router.post("/api/v1/allocations/{allocation_id}/activity")
@accepts(ActivityBody)
def report_activity(
    allocation_id: str, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> dict:
    """The task's service is in use now (a notebook's busy kernel, an open terminal): its idle_timeout
    counts from here."""
    idle = parse(ActivityBody, body).idle
    task_activity.report(ctx_of(request), who, allocation_id, idle=idle)
    return {}


def throttle_of(conn: HTTPConnection) -> ActivityThrottle:
    state = conn.app.state
    throttle = getattr(state, "task_activity", None)
    if throttle is None:  # an app made without app.py's factory (a test's): one of its own
        throttle = state.task_activity = ActivityThrottle()
    return throttle


async def proxied(conn: HTTPConnection, task_id: str) -> None:
    """A request or message for the task's service passed the proxy: its last use is now (written at
    most once per THROTTLE_SECONDS per task)."""
    ctx = ctx_of(conn)
    if throttle_of(conn).due(task_id, ctx.clock.now()):
        await run_in_threadpool(task_activity.touch, ctx, task_id)
