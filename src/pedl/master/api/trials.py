"""Trials: describe, workloads, logs (NDJSON, optionally followed), and the reports a running trial
makes (metrics, progress, searcher completion)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from pedl.errors import InvalidArgument
from pedl.master.api import metric_batch_body
from pedl.master.api.checkpoint_query import checkpoint_order, checkpoint_states
from pedl.master.api.conditional import unless_changed
from pedl.master.api.deps import (
    INT64_MAX,
    Body,
    Caller,
    IdPath,
    caller,
    ctx_of,
    json_body,
    parse,
    raw_body,
)
from pedl.master.api.log_filters import log_fields_stream, log_filter, log_stream
from pedl.master.api.metric_batch_body import MetricBatchBody
from pedl.master.api.openapi import EARLY_EXIT, accepts, answers, produces
from pedl.master.experiments import service as experiments_service
from pedl.master.metrics import DEFAULT_POINTS, MAX_POINTS, MIN_POINTS
from pedl.master.metrics import batches as metric_batches
from pedl.master.metrics import reports as metric_reports
from pedl.master.metrics import service as metrics
from pedl.master.trials import reports as trial_reports
from pedl.master.trials import service as trials_service
from pedl.master.trials import time_series as trial_time_series
from pedl.master.trials import timeline as trial_timeline
from pedl.master.wire.base import Pagination
from pedl.master.wire.checkpoint import GetTrialCheckpointsResponse
from pedl.master.wire.trial import (
    CompareTrialsResponse,
    GetTrialMetricsResponse,
    GetTrialResponse,
    GetTrialWorkloadsResponse,
)

router = APIRouter(prefix="/api/v1")


class MetricsInner(Body):
    avgMetrics: dict[str, Any]
    batchMetrics: list[Any] | None = None


class TrialMetrics(Body):
    trialId: int | None = None
    trialRunId: int = 0
    stepsCompleted: int = Field(..., ge=0)
    reportTime: str | None = None
    metrics: MetricsInner


class ReportMetricsBody(Body):
    metrics: TrialMetrics
    group: str = Field("training", min_length=1, max_length=64)


class ProgressBody(Body):
    progress: float = Field(..., ge=0, allow_inf_nan=False)
    is_raw: bool = False


class CompletedOpBody(Body):
    op: dict[str, Any] = Field(default_factory=dict)
    searcherMetric: float | str | None = None


def _stream_metrics(request: Request, trial_ids: list[int], group: str, start_batches: int = 0) -> StreamingResponse:
    ctx = ctx_of(request)
    ids = metric_reports.check_trials(ctx, trial_ids)

    async def stream():
        pages = metric_reports.pages(ctx, ids, group, start_batches)
        while True:
            page = await run_in_threadpool(next, pages, None)
            if page is None:
                return
            yield json.dumps({"result": {"metrics": [m.model_dump(exclude_unset=True) for m in page]}}) + "\n"

    return StreamingResponse(stream(), media_type="application/x-ndjson")


TRIAL_IDS = Query(default_factory=list, description="the trials (repeat the parameter)")


@router.get("/trials/metrics/trial_metrics")
@produces("application/x-ndjson", errors=(404,))
def trials_metrics(
    request: Request,
    _: Caller = Depends(caller),
    trialIds: list[int] = TRIAL_IDS,
    group: str = Query(min_length=1, max_length=64),
    startBatches: int = Query(
        0,
        ge=0,
        le=INT64_MAX,
        description=("pedl's own: only the reports from this many steps on (a TensorBoard's refresh)"),
    ),
) -> StreamingResponse:
    """Every report of the trials' group (Determined's SDK: trial.iter_metrics(group))."""
    return _stream_metrics(request, trialIds, group, startBatches)


@router.get("/trials/metrics/training_metrics")
@produces("application/x-ndjson", errors=(404,))
def trials_training_metrics(
    request: Request, _: Caller = Depends(caller), trialIds: list[int] = TRIAL_IDS
) -> StreamingResponse:
    return _stream_metrics(request, trialIds, "training")


@router.get("/trials/metrics/validation_metrics")
@produces("application/x-ndjson", errors=(404,))
def trials_validation_metrics(
    request: Request, _: Caller = Depends(caller), trialIds: list[int] = TRIAL_IDS
) -> StreamingResponse:
    return _stream_metrics(request, trialIds, "validation")


@router.get(
    "/trials/time-series",
    response_model=CompareTrialsResponse,  # before /trials/{trial_id}
    response_model_exclude_unset=True,
)
@answers(404)  # a trial of trialIds that does not exist
def compare_trials(
    request: Request,
    _: Caller = Depends(caller),
    trialIds: list[int] = TRIAL_IDS,
    metricIds: list[str] = Query(default_factory=list, description="group.metric_name, repeated"),
    metricNames: list[str] = Query(default_factory=list),
    group: str | None = Query(None, max_length=64),
    maxDatapoints: int = Query(DEFAULT_POINTS, ge=MIN_POINTS, le=MAX_POINTS),
    startBatches: int | None = Query(None, ge=0),
    endBatches: int | None = Query(None, ge=0),
) -> CompareTrialsResponse:
    """Determined's CompareTrials: each trial with its series downsampled to maxDatapoints points. The
    metrics are metricIds ("group.name"), or metricNames of `group` (training by default)."""
    groups = trial_time_series.parse_metric_ids(metricIds)
    if metricNames:
        named = groups.setdefault(group or "training", [])
        named += [n for n in dict.fromkeys(metricNames) if n not in named]
    if not groups:
        raise InvalidArgument.at("metricIds", "name at least one metric, as group.metric_name")
    return CompareTrialsResponse(
        trials=trial_time_series.compare(
            ctx_of(request),
            trialIds,
            groups,
            max_points=maxDatapoints,
            start_batches=startBatches,
            end_batches=endBatches,
        )
    )


@router.get("/trials/{trial_id}", response_model=GetTrialResponse, response_model_exclude_unset=True)
def get_trial(
    trial_id: IdPath,
    request: Request,
    _: Caller = Depends(unless_changed("trials", "metrics", "checkpoints", "allocations")),
) -> GetTrialResponse:
    return GetTrialResponse(trial=trials_service.describe(ctx_of(request), trial_id))


@router.get(
    "/trials/{trial_id}/checkpoints", response_model=GetTrialCheckpointsResponse, response_model_exclude_unset=True
)
def trial_checkpoints(
    trial_id: IdPath,
    request: Request,
    _: Caller = Depends(unless_changed("checkpoints", "trials", "metrics")),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    sortByAttr: str | None = None,
    orderBy: str | None = None,
    sortByMetric: str | None = Query(None, max_length=255),
    states: list[str] = Query(default_factory=list),
) -> GetTrialCheckpointsResponse:
    """The trial's checkpoints in the order Determined's master gives them: by steps unless another
    sort is asked (the trial's id sorts nothing here), ORDER_BY_DESC reversing it; by the searcher
    metric the best first unless an order is asked, those without it last. The SDK's
    trial.top_checkpoint() takes the first. det 0.38.1's `trial download --best/--latest` takes the
    last downloadable one, as it does against Determined (docs/from-determined.md)."""
    sort, descending = checkpoint_order(sortByAttr, orderBy)
    if sortByAttr in (None, "", "SORT_BY_UNSPECIFIED", "SORT_BY_TRIAL_ID"):
        sort = "steps"
    page = experiments_service.checkpoints(
        ctx_of(request),
        trial_id=trial_id,
        limit=limit,
        offset=offset,
        sort=sort,
        descending=descending,
        metric=sortByMetric or None,
        states=checkpoint_states(states),
    )
    return GetTrialCheckpointsResponse(
        checkpoints=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.get("/trials/{trial_id}/allocations")
def allocations(
    trial_id: IdPath, request: Request, _: Caller = Depends(unless_changed("allocations", "instances", "trials"))
) -> dict:
    """pedl's own: the trial's allocations, oldest first, for the WebUI's timeline."""
    return {"allocations": trial_timeline.timeline(ctx_of(request), trial_id)}


@router.get("/trials/{trial_id}/workloads", response_model=GetTrialWorkloadsResponse, response_model_exclude_unset=True)
def workloads(
    trial_id: IdPath,
    request: Request,
    _: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
) -> GetTrialWorkloadsResponse:
    page = trials_service.workloads(ctx_of(request), trial_id, offset, limit)
    return GetTrialWorkloadsResponse(
        workloads=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.get("/trials/{trial_id}/metrics", response_model=GetTrialMetricsResponse, response_model_exclude_unset=True)
def list_metrics(
    trial_id: IdPath, request: Request, _: Caller = Depends(caller), group: str | None = None
) -> GetTrialMetricsResponse:
    return GetTrialMetricsResponse(metrics=trials_service.metrics_of(ctx_of(request), trial_id, group))


@router.post("/trials/{trial_id}/metrics")
@accepts(ReportMetricsBody)
def report_metrics(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    req = parse(ReportMetricsBody, body)
    if req.metrics.trialId not in (None, trial_id):
        raise InvalidArgument(
            f"metrics.trialId: {req.metrics.trialId} does not match the path's trial {trial_id}",
            fields=[{"field": "metrics.trialId", "message": "does not match the path"}],
        )
    values = metrics.clean_metrics(req.metrics.metrics.avgMetrics, "metrics.metrics.avgMetrics")
    trial_reports.report_metrics(
        ctx_of(request),
        who,
        trial_id,
        group=req.group,
        steps_completed=req.metrics.stepsCompleted,
        trial_run_id=req.metrics.trialRunId,
        values=values,
    )
    return {}


@router.post("/trials/{trial_id}/metrics/batch")
@accepts(MetricBatchBody)
def report_metric_batch(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), raw: bytes = Depends(raw_body)
) -> dict:
    """pedl's own: the reports pedl.core queued, at most MAX_REPORTS, stored at once and each at most once."""
    ctx = ctx_of(request)
    return {"stored": metric_batches.store(ctx, who, trial_id, metric_batch_body.parse(raw, ctx.config.limits))}


@router.post("/trials/{trial_id}/progress")
@accepts(ProgressBody, bare={"type": "number", "minimum": 0})
def report_progress(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    if isinstance(body, int | float) and not isinstance(body, bool):
        body = {"progress": body}
    req = parse(ProgressBody, body)
    trial_reports.report_progress(ctx_of(request), who, trial_id, req.progress)
    return {}


@router.post("/trials/{trial_id}/searcher/completed_operation")
@accepts(CompletedOpBody)
def completed_operation(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    req = parse(CompletedOpBody, body)
    trial_reports.completed_operation(ctx_of(request), who, trial_id, req.op.get("length"))
    return {}


@router.post("/trials/{trial_id}/kill")
@answers(409)
def kill_trial(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    trials_service.kill_by(ctx_of(request), who, trial_id)
    return {}


@router.post("/runs/start")
def run_start(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    trial_reports.run_start(ctx_of(request), who)
    return {"storageId": 0}


@router.post("/trials/{trial_id}/runner/metadata")
def runner_metadata(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    trial_reports.runner_metadata(ctx_of(request), who, trial_id)
    return {}


@router.post("/trials/{trial_id}/early_exit")
@accepts(EARLY_EXIT)
def early_exit(
    trial_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    reason = body.get("reason", "unspecified") if isinstance(body, dict) else body
    trial_reports.early_exit(ctx_of(request), who, trial_id, str(reason))
    return {}


@router.get("/trials/{trial_id}/logs/fields")
@produces("application/x-ndjson")
async def trial_log_fields(
    trial_id: IdPath, request: Request, _: Caller = Depends(caller), follow: bool = False
) -> StreamingResponse:
    """Determined's v1TrialLogsFieldsResponse: the values each log filter may take, sent once."""
    ctx = ctx_of(request)
    return await log_fields_stream(ctx, await run_in_threadpool(trials_service.task_id_of, ctx, trial_id))


@router.get("/trials/{trial_id}/logs")
@produces("application/x-ndjson")
async def trial_logs(
    trial_id: IdPath,
    request: Request,
    who: Caller = Depends(caller),
    follow: bool = False,
    limit: int = Query(0, ge=0, le=INT64_MAX),
    orderBy: str | None = None,
    agentIds: list[str] = Query(default_factory=list),
    containerIds: list[str] = Query(default_factory=list),
    rankIds: list[int] = Query(default_factory=list),
    levels: list[str] = Query(default_factory=list),
    sources: list[str] = Query(default_factory=list),
    stdtypes: list[str] = Query(default_factory=list),
    timestampAfter: str | None = None,
    timestampBefore: str | None = None,
    searchText: str | None = Query(None, max_length=1024),
) -> StreamingResponse:
    """The lines of the trial's task (as GET /tasks/{taskId}/logs, with its filters): oldest first,
    ORDER_BY_DESC newest first; with follow, until the trial has ended and its last lines are sent."""
    ctx = ctx_of(request)
    flt = log_filter(
        [],
        containerIds,
        agentIds,
        rankIds,
        levels,
        sources,
        stdtypes,
        timestampAfter,
        timestampBefore,
        searchText,
        False,
    )
    task_id = await run_in_threadpool(trials_service.task_id_of, ctx, trial_id)
    return log_stream(
        ctx,
        task_id,
        flt,
        order_by=orderBy,
        follow=follow,
        limit=limit,
        disconnected=request.is_disconnected,
        user_id=who.user.id,
    )
