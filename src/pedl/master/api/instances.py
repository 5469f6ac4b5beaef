"""Instances: the machines provisioners launched, with their state, idle time and cost
(pedl's own; det has no such route)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.agents import instances as instances_service
from pedl.master.api.deps import Caller, caller, ctx_of

router = APIRouter(prefix="/api/v1")


@router.get("/instances")
def list_instances(
    request: Request, _: Caller = Depends(caller), resourcePool: str | None = None, all: bool = False
) -> dict:  # the query parameter's name
    return {"instances": instances_service.listing(ctx_of(request), resourcePool, all)}
