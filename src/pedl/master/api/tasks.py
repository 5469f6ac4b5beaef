"""Tasks and allocations: the task list, the model definition a task downloads, preemption signals
(long poll) and logs a task posts itself."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from sqlalchemy import select
from starlette.concurrency import run_in_threadpool

from pedl.errors import Forbidden, NotFound
from pedl.master.api import shapes
from pedl.master.api.deps import Caller, caller, ctx_of, json_body
from pedl.master.db import models
from pedl.master.lifecycle import LIVE_ALLOCATION
from pedl.master.services import logs, model_definitions

router = APIRouter(prefix="/api/v1")


@router.get("/tasks")
def list_tasks(request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        allocs = list(s.scalars(select(models.Allocation).where(models.Allocation.state.in_(LIVE_ALLOCATION))))
        agents = {a.id: a for a in s.scalars(select(models.Agent))}
        return {"allocationIdToSummary": {a.id: shapes.allocation_summary(a, agents) for a in allocs}}


@router.get("/tasks/{task_id}/context_directory")
def context_directory(task_id: str, request: Request, who: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        trial = s.scalar(select(models.Trial).where(models.Trial.task_id == task_id))
        if trial is None:
            raise NotFound(f"task {task_id} not found")
        if who.allocation_id is not None:
            alloc = s.get(models.Allocation, who.allocation_id)
            if alloc is None or alloc.task_id != task_id:
                raise Forbidden(f"this token does not belong to task {task_id}")
        md = s.get(models.ModelDefinition, trial.experiment_id)
        return {"b64Tgz": model_definitions.b64_tgz(md.archive) if md else ""}


@router.post("/task/logs")
def post_task_logs(request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)) -> dict:
    from pedl.errors import InvalidArgument

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
        else:
            continue
        raise InvalidArgument(f"{field}: {problem}", fields=[{"field": field, "message": problem}])
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        if who.allocation_id is not None:  # a task writes only its own logs
            alloc = s.get(models.Allocation, who.allocation_id)
            foreign = sorted({e["taskId"] for e in entries} - {alloc.task_id if alloc else ""})
            if foreign:
                raise Forbidden(f"this task's token cannot post logs for task(s) {', '.join(foreign)}")
        by_task: dict[str, list[tuple[float, str, str]]] = {}
        for e in entries:
            if isinstance(e, dict) and isinstance(e.get("taskId"), str):
                by_task.setdefault(e["taskId"], []).append(
                    (ctx.clock.now(), str(e.get("level") or "LOG_LEVEL_INFO"), str(e.get("log", ""))))
        for task_id, lines in by_task.items():
            trial = s.scalar(select(models.Trial).where(models.Trial.task_id == task_id))
            logs.add_api_lines(s, task_id, trial.id if trial else None, lines)
    return {}


@router.get("/allocations/{allocation_id}/signals/preemption")
async def preemption_signal(allocation_id: str, request: Request, who: Caller = Depends(caller),
                            timeout_seconds: int = Query(0, ge=0, le=3600)) -> dict:
    ctx = ctx_of(request)
    ctl = ctx.controller

    def exists() -> bool:
        with ctx.db.session() as s:
            return s.get(models.Allocation, allocation_id) is not None

    if not await run_in_threadpool(exists):
        raise NotFound(f"allocation {allocation_id} not found")
    # a long poll waits in real time, whatever clock the master's decisions run on
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_seconds
    while not ctl.should_preempt(allocation_id):
        if loop.time() >= deadline or await request.is_disconnected():
            break
        await asyncio.sleep(0.2)
    return {"preempt": ctl.should_preempt(allocation_id)}


@router.post("/allocations/{allocation_id}/signals/ack_preemption")
def ack_preemption(allocation_id: str, request: Request, _: Caller = Depends(caller),
                   _body: Any = Depends(json_body)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        alloc = s.get(models.Allocation, allocation_id)
        if alloc is None:
            raise NotFound(f"allocation {allocation_id} not found")
        alloc.preempt_acked = True
    return {}
