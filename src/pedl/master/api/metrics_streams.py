"""Determined's metric streams, as the WebUI and det's e2e tests read them: newline-delimited
`{"result": ...}` messages, the first at once, then what is new every period_seconds, until the
experiments have ended (metrics/streams.py decides what is new; metrics/stream_reads.py reads)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from pedl.errors import PedlError
from pedl.master.api.deps import INT64_MAX, Caller, IdPath, caller, ctx_of
from pedl.master.api.log_filters import HeldStream
from pedl.master.identity import Bound
from pedl.master.metrics import stream_reads as reads
from pedl.master.metrics import streams

router = APIRouter(prefix="/api/v1/experiments")

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def int32(default: int | None, description: str | None = None) -> Any:
    """A query parameter that Determined declares int32."""
    return Query(default, description=description, ge=INT32_MIN, le=INT32_MAX)


PERIOD = int32(None, "seconds between messages: 0 or none, 30; at least 1, at most 300")
METRIC_TYPE = Query(None, description="METRIC_TYPE_TRAINING, METRIC_TYPE_VALIDATION or METRIC_TYPE_PROFILING")
GROUP = Query(None, description="a metric group, instead of metric_type")


async def follow(
    poll: reads.Poll,
    first: tuple[dict, bool],
    *,
    period: float,
    disconnected: Callable[[], Awaitable[bool]],
    wait: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> AsyncIterator[str]:
    """`first`, then a message of each poll every `period` (each read off the event loop), until a poll
    finds the experiments ended, the client has gone, or they can no longer be read (deleted)."""
    message, ended = first
    while True:
        yield json.dumps({"result": message}) + "\n"
        if ended:
            return
        await wait(period)
        if await disconnected():
            return
        try:
            message, ended = await run_in_threadpool(poll)
        except PedlError:  # the experiment went away: the headers are sent, so the stream just ends
            return


async def _stream(request: Request, who: Caller, start: Callable[[], reads.Poll], period: float) -> StreamingResponse:
    """The stream of the poll `start` builds (its errors, such as an unknown experiment, answered as
    such), as one of the metric streams its user holds open (a 429 past limits.max_log_follows_per_user)."""
    ctx = ctx_of(request)
    slot = ctx.metric_streams.take(
        who.user.id, Bound(ctx.config.limits.max_log_follows_per_user, "limits.max_log_follows_per_user")
    )
    try:
        poll = await run_in_threadpool(start)
        first = await run_in_threadpool(poll)
    except BaseException:
        slot.release()
        raise
    return HeldStream(
        follow(poll, first, period=period, disconnected=request.is_disconnected),
        slot,
        media_type="application/x-ndjson",
    )


@router.get("/metrics-stream/metric-names")
async def metric_names(
    request: Request,
    ids: list[int] = Query(default_factory=list),
    period_seconds: int | None = PERIOD,
    who: Caller = Depends(caller),
) -> StreamingResponse:
    """The experiments' searcher metrics (first message), then each training, validation and other
    group's metric name once, as the trials report them."""
    wanted, period = streams.experiment_ids(ids), streams.period(period_seconds)
    return await _stream(request, who, lambda: reads.metric_names_poll(ctx_of(request), wanted), period)


@router.get("/{experiment_id}/metrics-stream/batches")
async def metric_batches(
    experiment_id: IdPath,
    request: Request,
    metric_name: str | None = None,
    metric_type: str | None = METRIC_TYPE,
    group: str | None = GROUP,
    period_seconds: int | None = PERIOD,
    who: Caller = Depends(caller),
) -> StreamingResponse:
    """Each batch count at which a trial of the experiment reported the metric, once."""
    name, grp = streams.metric_name(metric_name), streams.metric_group(metric_type, group)
    period = streams.period(period_seconds)
    return await _stream(request, who, lambda: reads.batches_poll(ctx_of(request), experiment_id, grp, name), period)


@router.get("/{experiment_id}/metrics-stream/trials-snapshot")
async def trials_snapshot(
    experiment_id: IdPath,
    request: Request,
    metric_name: str | None = None,
    metric_type: str | None = METRIC_TYPE,
    group: str | None = GROUP,
    batches_processed: int = int32(0),
    batches_margin: int = int32(0),
    period_seconds: int | None = PERIOD,
    who: Caller = Depends(caller),
) -> StreamingResponse:
    """Each trial's value of the metric at batches_processed (give or take batches_margin), once per report."""
    name, grp = streams.metric_name(metric_name), streams.metric_group(metric_type, group)
    window, period = streams.Window.around(batches_processed, batches_margin), streams.period(period_seconds)
    return await _stream(
        request, who, lambda: reads.snapshot_poll(ctx_of(request), experiment_id, grp, name, window), period
    )


@router.get("/{experiment_id}/metrics-stream/trials-sample")
async def trials_sample(
    experiment_id: IdPath,
    request: Request,
    metric_name: str | None = None,
    metric_type: str | None = METRIC_TYPE,
    group: str | None = GROUP,
    max_trials: int = int32(0),
    max_datapoints: int = int32(0),
    start_batches: int = int32(0),
    end_batches: int = int32(0),
    period_seconds: int | None = PERIOD,
    who: Caller = Depends(caller),
) -> StreamingResponse:
    """The experiment's top max_trials trials' series of the metric: a trial promoted into them comes with
    its hparams and its (downsampled) series so far, then only its new points; demoted ones are named."""
    name, grp = streams.metric_name(metric_name), streams.metric_group(metric_type, group)
    most_trials = streams.bounded("max_trials", max_trials, streams.DEFAULT_SAMPLE_TRIALS, streams.MAX_SAMPLE_TRIALS)
    most_points = streams.bounded("max_datapoints", max_datapoints, streams.DEFAULT_DATAPOINTS, streams.MAX_DATAPOINTS)
    low, high = max(start_batches, 0), end_batches if end_batches > 0 else INT64_MAX
    period = streams.period(period_seconds)
    return await _stream(
        request,
        who,
        lambda: reads.sample_poll(
            ctx_of(request),
            experiment_id,
            grp,
            name,
            most_trials=most_trials,
            most_points=most_points,
            low=low,
            high=high,
        ),
        period,
    )
