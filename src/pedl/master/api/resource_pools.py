"""Resource pools and instances: capacity, queue, instances, provisioning errors."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api.deps import Caller, caller, ctx_of, pagination
from pedl.master.services import resource_pools as pools_service

router = APIRouter(prefix="/api/v1")


@router.get("/resource-pools")
def list_pools(request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        pools = [pools_service.pool_summary(ctx.controller, s, p) for p in ctx.config.resource_pools]
        return {"resourcePools": pools, "pagination": pagination(0, len(pools), len(pools), len(pools))}


@router.get("/resource-pools/{name}")
def describe_pool(name: str, request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        return {"resourcePool": pools_service.describe(ctx.controller, s, name)}


@router.get("/instances")
def list_instances(request: Request, _: Caller = Depends(caller), resourcePool: str | None = None,
                   all: bool = False) -> dict:  # noqa: A002 - the query parameter's name
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        return {"instances": pools_service.list_instances(ctx.controller, s, resourcePool, all)}
