"""The job queue (`det job list|update|update-batch`): GET /job-queues-v2 lists each pool's jobs in
the scheduler's order; POST /job-queues changes a job's priority, weight, pool or place."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.experiments import jobs as jobs_service
from pedl.master.wire.base import Pagination
from pedl.master.wire.job import GetJobsV2Response

router = APIRouter(prefix="/api/v1")

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


@router.get("/job-queues-v2", response_model=GetJobsV2Response, response_model_exclude_unset=True)
def list_jobs(
    request: Request,
    _: Caller = Depends(caller),
    resourcePool: str | None = None,
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    orderBy: str | None = None,
    states: list[str] = Query(default_factory=list),
) -> GetJobsV2Response:
    """Every pool's jobs (one pool's with resourcePool), most urgent first (ORDER_BY_DESC: last first)."""
    for state in states:
        if state not in jobs_service.JOB_STATES:
            raise InvalidArgument.at("states", f"{state!r} is not one of {', '.join(jobs_service.JOB_STATES)}")
    size = min(limit or jobs_service.PAGE_MAX, jobs_service.PAGE_MAX)
    query = jobs_service.JobQuery(
        pool=resourcePool or None,
        states=tuple(states),
        last_first=orderBy == "ORDER_BY_DESC",
        offset=offset,
        limit=size,
    )
    page = jobs_service.listing(ctx_of(request), query)
    return GetJobsV2Response(jobs=page.jobs, pagination=Pagination.of(offset, size, page.total, len(page.jobs)))


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
