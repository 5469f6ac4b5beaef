"""Tasks and allocations: the task list, the model definition a task downloads, preemption signals
(long poll) and logs a task posts itself."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from pedl.errors import InvalidArgument
from pedl.master.api import shapes
from pedl.master.api.deps import Caller, agent_fetch_caller, caller, ctx_of, json_body
from pedl.master.api.openapi import TASK_LOGS, accepts
from pedl.master.services import allocations
from pedl.master.services.logs import LOG_LEVELS

router = APIRouter(prefix="/api/v1")


@router.get("/tasks")
def list_tasks(request: Request, _: Caller = Depends(caller)) -> dict:
    allocs, agents = allocations.live_summaries(ctx_of(request))
    return {"allocationIdToSummary": {a.id: shapes.allocation_summary(a, agents) for a in allocs}}


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
async def preemption_signal(allocation_id: str, request: Request, who: Caller = Depends(caller),
                            timeout_seconds: int = Query(0, ge=0, le=3600)) -> dict:
    preempt = await allocations.wait_preemption(ctx_of(request), who, allocation_id, timeout_seconds,
                                                request.is_disconnected)
    return {"preempt": preempt}


@router.post("/allocations/{allocation_id}/signals/ack_preemption")
def ack_preemption(allocation_id: str, request: Request, who: Caller = Depends(caller),
                   _body: Any = Depends(json_body)) -> dict:
    allocations.ack_preemption(ctx_of(request), who, allocation_id)
    return {}
