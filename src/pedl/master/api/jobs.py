"""The job queue (`det job list|update|update-batch`): GET /job-queues-v2 lists each pool's jobs in
the scheduler's order; POST /job-queues changes a job's priority, weight, pool or place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, pagination, parse
from pedl.master.api.openapi import accepts
from pedl.master.cluster.job_queue import job_id
from pedl.master.experiments import jobs as jobs_service
from pedl.master.wire.base import ts

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

router = APIRouter(prefix="/api/v1")

PAGE_MAX = 1000  # jobs per page: det asks again from endIndex
UPDATES_MAX = 100
ID_MAX = 64


class QueueControl(Body):
    """det's v1QueueControl: a job id and one change (det sends the others as null)."""

    jobId: str = Field(..., min_length=1, max_length=ID_MAX)
    priority: int | None = None  # checked as `det e set priority` checks it
    weight: float | None = None
    resourcePool: str | None = Field(None, min_length=1, max_length=255)
    aheadOf: str | None = Field(None, min_length=1, max_length=ID_MAX)
    behindOf: str | None = Field(None, min_length=1, max_length=ID_MAX)


class UpdateJobQueueBody(Body):
    updates: list[QueueControl] = Field(..., max_length=UPDATES_MAX)


def job(ctx: MasterContext, shown: jobs_service.ShownJob) -> dict[str, Any]:
    """Determined's v1Job, its summary (state, jobsAhead) inside as det reads it."""
    j, exp = shown.job, shown.experiment
    pool = ctx.config.pool(j.pool)
    return {
        "jobId": job_id(exp.id),
        "type": "TYPE_EXPERIMENT",
        "entityId": str(exp.id),
        "name": exp.name,
        "submissionTime": ts(exp.start_time),
        "username": shown.username,
        "userId": exp.owner_id,
        "resourcePool": j.pool,
        "isPreemptible": bool(pool and pool.scheduler.preemption),
        "priority": j.priority,
        "weight": float((exp.config.get("resources") or {}).get("weight", 1.0)),
        "requestedSlots": j.requested_slots,
        "allocatedSlots": j.allocated_slots,
        "workspaceId": shown.workspace_id,
        "progress": exp.progress,
        "summary": {"state": jobs_service.state_of(j), "jobsAhead": j.jobs_ahead},
    }


@router.get("/job-queues-v2")
def list_jobs(
    request: Request,
    _: Caller = Depends(caller),
    resourcePool: str | None = None,
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    orderBy: str | None = None,
    states: list[str] = Query(default_factory=list),
) -> dict:
    """Every pool's jobs (one pool's with resourcePool), most urgent first (ORDER_BY_DESC: last first)."""
    for state in states:
        if state not in jobs_service.JOB_STATES:
            raise InvalidArgument.at("states", f"{state!r} is not one of {', '.join(jobs_service.JOB_STATES)}")
    ctx = ctx_of(request)
    shown = jobs_service.listing(ctx, resourcePool or None, states)
    if orderBy == "ORDER_BY_DESC":
        shown.reverse()
    size = min(limit or PAGE_MAX, PAGE_MAX)
    page = shown[offset : offset + size]
    jobs = [job(ctx, s) for s in page]
    return {
        "jobs": [{"full": j, "summary": j["summary"]} for j in jobs],
        "pagination": pagination(offset, size, len(shown), len(page)),
    }


@router.post("/job-queues")
@accepts(UpdateJobQueueBody, errors=(404, 409))  # an unknown job; a move its state does not allow
def update_jobs(request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)) -> dict:
    req = parse(UpdateJobQueueBody, body)
    jobs_service.update(
        ctx_of(request),
        who,
        [
            jobs_service.QueueUpdate(
                u.jobId,
                priority=u.priority,
                weight=u.weight,
                resource_pool=u.resourcePool,
                ahead_of=u.aheadOf,
                behind_of=u.behindOf,
            )
            for u in req.updates
        ],
    )
    return {}
