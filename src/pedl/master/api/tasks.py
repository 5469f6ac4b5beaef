"""Tasks and allocations: the task list, a task by its id and its logs (`det task logs [-f]`), the
model definition a task downloads, preemption signals (long poll) and logs a task posts itself."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Caller, agent_fetch_caller, caller, ctx_of, json_body
from pedl.master.api.log_filters import log_fields_stream, log_filter, log_stream
from pedl.master.api.openapi import TASK_LOGS, accepts, produces
from pedl.master.lifecycle.log_lines import LOG_LEVELS
from pedl.master.tasks import allocations
from pedl.master.tasks import logs as task_logs
from pedl.master.wire.task import AllocationSummary, GetTaskResponse, GetTasksResponse

router = APIRouter(prefix="/api/v1")


# Determined's master also serves the map alone at /tasks, outside /api/v1 (its e2e suite polls it)
legacy_router = APIRouter()


@router.get("/tasks", response_model=GetTasksResponse, response_model_exclude_unset=True)
def list_tasks(request: Request, _: Caller = Depends(caller)) -> GetTasksResponse:
    return GetTasksResponse(allocationIdToSummary=allocations.live_summaries(ctx_of(request)))


@legacy_router.get("/tasks", response_model=dict[str, AllocationSummary], response_model_exclude_unset=True)
def list_tasks_legacy(request: Request, _: Caller = Depends(caller)) -> dict[str, AllocationSummary]:
    """Allocation id -> summary, as /api/v1/tasks' allocationIdToSummary."""
    return allocations.live_summaries(ctx_of(request))


@router.get("/tasks/{task_id}/context_directory")
def context_directory(task_id: str, request: Request, who: Caller = Depends(agent_fetch_caller)) -> dict:
    return {"b64Tgz": allocations.context_b64(ctx_of(request), who, task_id)}


@router.post("/task/logs")
@accepts(TASK_LOGS)
def post_task_logs(request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)) -> dict:
    entries = body.get("logs") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        raise InvalidArgument("logs: must be a list", fields=[{"field": "logs", "message": "must be a list"}])
    for i, e in enumerate(entries):  # refuse bad entries rather than dropping them silently
        if not isinstance(e, dict):
            field, problem = f"logs[{i}]", "must be an object"
        elif not isinstance(e.get("taskId"), str) or not e["taskId"]:
            field, problem = f"logs[{i}].taskId", "must be a non-empty string"
        elif not isinstance(e.get("log", ""), str):
            field, problem = f"logs[{i}].log", "must be a string"
        elif e.get("level") not in (None, "", *LOG_LEVELS):
            field, problem = f"logs[{i}].level", f"must be one of {', '.join(LOG_LEVELS)}"
        else:
            continue
        raise InvalidArgument(f"{field}: {problem}", fields=[{"field": field, "message": problem}])
    allocations.post_logs(ctx_of(request), who, entries)
    return {}


@router.get("/allocations/{allocation_id}/signals/preemption")
async def preemption_signal(
    allocation_id: str, request: Request, who: Caller = Depends(caller), timeout_seconds: int = Query(0, ge=0, le=3600)
) -> dict:
    preempt = await allocations.wait_preemption(
        ctx_of(request), who, allocation_id, timeout_seconds, request.is_disconnected
    )
    return {"preempt": preempt}


@router.post("/allocations/{allocation_id}/signals/ack_preemption")
def ack_preemption(
    allocation_id: str, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    allocations.ack_preemption(ctx_of(request), who, allocation_id)
    return {}


SEARCH_MAX = 1024


@router.get("/tasks/{task_id}", response_model=GetTaskResponse, response_model_exclude_unset=True)
def get_task(task_id: str, request: Request, _: Caller = Depends(caller)) -> GetTaskResponse:
    """Determined's v1GetTaskResponse: a trial's task (or a command's, notebook's, shell's or
    TensorBoard's), and its allocations (one per start)."""
    return GetTaskResponse(task=task_logs.describe(ctx_of(request), task_id))


@router.get("/tasks/{task_id}/logs/fields")
@produces("application/x-ndjson")
async def get_task_log_fields(
    task_id: str, request: Request, _: Caller = Depends(caller), follow: bool = False
) -> StreamingResponse:
    """Determined's v1TaskLogsFieldsResponse: the values each log filter may take, sent once."""
    return await log_fields_stream(ctx_of(request), task_id)


@router.get("/tasks/{task_id}/logs")
@produces("application/x-ndjson")
async def get_task_logs(
    task_id: str,
    request: Request,
    who: Caller = Depends(caller),
    follow: bool = False,
    limit: int = Query(0, ge=0, le=INT64_MAX),
    orderBy: str | None = None,
    allocationIds: list[str] = Query(default_factory=list),
    containerIds: list[str] = Query(default_factory=list),
    agentIds: list[str] = Query(default_factory=list),
    rankIds: list[int] = Query(default_factory=list),
    levels: list[str] = Query(default_factory=list),
    sources: list[str] = Query(default_factory=list),
    stdtypes: list[str] = Query(default_factory=list),
    timestampAfter: str | None = None,
    timestampBefore: str | None = None,
    searchText: str | None = Query(None, max_length=SEARCH_MAX),
    enableRegex: bool = False,
) -> StreamingResponse:
    """Determined's v1TaskLogsResponse lines, oldest first (ORDER_BY_DESC: newest first, det's --tail);
    with follow, until the task has ended and its last lines are sent."""
    ctx = ctx_of(request)
    flt = log_filter(
        allocationIds,
        containerIds,
        agentIds,
        rankIds,
        levels,
        sources,
        stdtypes,
        timestampAfter,
        timestampBefore,
        searchText,
        enableRegex,
    )
    await run_in_threadpool(task_logs.require, ctx, task_id)
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
