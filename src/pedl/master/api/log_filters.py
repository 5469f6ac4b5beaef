"""The log filters of GET /api/v1/tasks/{id}/logs and /trials/{id}/logs as Determined takes them, the
stream both answer with (a followed one holding one of its user's follow slots while it is open), and
their logs/fields routes (the values each filter may take)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.types import Receive, Scope, Send

from pedl.errors import InvalidArgument
from pedl.master.api.ndjson_stream import results
from pedl.master.identity import Slot
from pedl.master.lifecycle.log_lines import LOG_LEVELS
from pedl.master.tasks import logs as task_logs

FILTER_MAX = 100  # values of one log filter


async def log_fields_stream(ctx, task_id: str) -> StreamingResponse:  # a MasterContext
    """One NDJSON line with the task's fields (follow or not: they are read once, and the stream ends)."""
    fields = await run_in_threadpool(task_logs.fields, ctx, task_id)
    return StreamingResponse(iter([json.dumps({"result": fields}) + "\n"]), media_type="application/x-ndjson")


class HeldStream(StreamingResponse):
    """A stream that holds a slot (a followed log's, tasks/logs.follow_slot) until it has been sent,
    or the client left, whatever way it ends (even before its first line)."""

    def __init__(self, content: AsyncIterator[str], slot: Slot, **kwargs: Any) -> None:
        super().__init__(content, **kwargs)
        self.slot = slot

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.slot.release()


def log_stream(
    ctx,
    task_id: str,
    flt: task_logs.LogFilter,
    *,
    order_by: str | None,
    follow: bool,
    limit: int | None,
    disconnected,
    user_id: int,
) -> StreamingResponse:
    """The task's lines as Determined's NDJSON log stream: oldest first, ORDER_BY_DESC newest first; with
    follow, until the task has ended and its last lines are sent, as one of the streams `user_id` follows
    (a 429 past limits.max_log_follows_per_user). `disconnected`: request.is_disconnected."""
    newest_first = order_by == "ORDER_BY_DESC" and not follow

    async def fetch(cursor: int | None, n: int) -> tuple[list[dict[str, Any]], int | None, bool]:
        got = await run_in_threadpool(
            task_logs.batch, ctx, task_id, flt, cursor=cursor, limit=n, newest_first=newest_first
        )
        return [line.model_dump() for line in got.lines], got.cursor, got.done

    lines = results(fetch, follow=follow, limit=limit or 0, disconnected=disconnected)
    if follow:
        return HeldStream(lines, task_logs.follow_slot(ctx, user_id), media_type="application/x-ndjson")
    return StreamingResponse(lines, media_type="application/x-ndjson")


def _time(name: str, value: str | None) -> float | None:
    if not value:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument.at(name, "an RFC 3339 time, such as 2021-10-26T23:17:12Z") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()  # no offset: UTC


def log_filter(
    allocation_ids: list[str],
    container_ids: list[str],
    agent_ids: list[str],
    rank_ids: list[int],
    levels: list[str],
    sources: list[str],
    stdtypes: list[str],
    after: str | None,
    before: str | None,
    text: str | None,
    regex: bool,
) -> task_logs.LogFilter:
    for name, values in (
        ("allocationIds", allocation_ids),
        ("containerIds", container_ids),
        ("agentIds", agent_ids),
        ("levels", levels),
        ("sources", sources),
        ("stdtypes", stdtypes),
    ):
        if len(values) > FILTER_MAX:
            raise InvalidArgument.at(name, f"at most {FILTER_MAX} values")
    bad = [lv for lv in levels if lv not in LOG_LEVELS]
    if bad:
        raise InvalidArgument.at("levels", f"{bad[0]!r} is not one of {', '.join(LOG_LEVELS)}")
    if len(rank_ids) > FILTER_MAX:
        raise InvalidArgument.at("rankIds", f"at most {FILTER_MAX} values")
    if regex:
        raise InvalidArgument.at("enableRegex", "pedl searches log text as plain text only")
    return task_logs.LogFilter(
        allocation_ids=allocation_ids,
        container_ids=container_ids,
        agent_ids=agent_ids,
        levels=levels,
        sources=sources,
        stdtypes=stdtypes,
        after=_time("timestampAfter", after),
        before=_time("timestampBefore", before),
        text=text or "",
        # pedl records no rank: every line is one "with no rank" (Determined's -1)
        no_lines=bool(rank_ids) and -1 not in rank_ids,
    )
