"""Resource pools: slots, queue and agents of each pool (Determined's v1ResourcePool subset)."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from sqlalchemy import select

from pedl.master.api.deps import Caller, caller, ctx_of
from pedl.master.cluster.controller import HELD
from pedl.master.db import models
from pedl.master.lifecycle import AgentState, AllocationState

router = APIRouter(prefix="/api/v1")


@router.get("/resource-pools")
def list_pools(request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    connected = ctx.hub.connected_ids()
    with ctx.db.session() as s:
        agents = list(s.scalars(select(models.Agent).where(models.Agent.state == AgentState.CONNECTED.value)))
        allocs = list(s.scalars(select(models.Allocation).where(
            models.Allocation.state.in_((*HELD, AllocationState.PENDING.value)))))
        pools = []
        for p in ctx.config.resource_pools:
            pool_agents = [a for a in agents if a.resource_pool == p.pool_name and a.id in connected]
            pool_allocs = [a for a in allocs if a.resource_pool == p.pool_name]
            pools.append({
                "name": p.pool_name, "description": p.description, "type": "RESOURCE_POOL_TYPE_STATIC",
                "numAgents": len(pool_agents), "slotsAvailable": sum(len(a.slots) for a in pool_agents),
                "slotsUsed": sum(a.slots_needed for a in pool_allocs if a.state in HELD),
                "slotType": "TYPE_CUDA" if any(sl.get("type") == "cuda" for a in pool_agents for sl in a.slots) else "TYPE_CPU",
                "schedulerType": f"SCHEDULER_TYPE_{p.scheduler.type.upper()}",
                "schedulerFittingPolicy": f"FITTING_POLICY_{p.scheduler.fitting_policy.upper()}",
                "defaultComputePool": p.pool_name == ctx.config.default_compute_resource_pool,
                "defaultAuxPool": p.pool_name == ctx.config.default_aux_resource_pool,
                "preemptible": p.scheduler.preemption,
                "queuedTasks": sum(1 for a in pool_allocs if a.state == AllocationState.PENDING.value),
                "runningTasks": sum(1 for a in pool_allocs if a.state in HELD),
                "provider": None,
            })
        return {"resourcePools": pools,
                "pagination": {"offset": 0, "limit": len(pools), "startIndex": 0, "endIndex": len(pools),
                               "total": len(pools)}}
