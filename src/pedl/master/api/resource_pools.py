"""Resource pools: capacity, queue, live instances, provisioning status and recent events."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api.deps import Caller, caller, ctx_of, pagination
from pedl.master.services import resource_pools as pools_service

router = APIRouter(prefix="/api/v1")


@router.get("/resource-pools")
def list_pools(request: Request, _: Caller = Depends(caller)) -> dict:
    pools = pools_service.summaries(ctx_of(request))
    return {"resourcePools": pools, "pagination": pagination(0, len(pools), len(pools), len(pools))}


@router.get("/resource-pools/{name}")
def describe_pool(name: str, request: Request, _: Caller = Depends(caller)) -> dict:
    return {"resourcePool": pools_service.describe_pool(ctx_of(request), name)}
