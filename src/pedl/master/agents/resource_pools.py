"""Resource pool views: capacity, queue, instances and provisioning status of each pool."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.master_config import ResourcePoolConfig
from pedl.errors import NotFound
from pedl.master.agents.instances import instance_summary
from pedl.master.db import models
from pedl.master.lifecycle.states import HELD, LIVE_INSTANCE, AgentState, AllocationState
from pedl.master.provisioner import moves

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def pool_summary(ctx: MasterContext, s: Session, pool: ResourcePoolConfig) -> dict[str, Any]:
    connected = ctx.hub.connected_ids()
    agents = [
        a
        for a in s.scalars(
            select(models.Agent).where(
                models.Agent.resource_pool == pool.pool_name, models.Agent.state == AgentState.CONNECTED
            )
        )
        if a.id in connected
    ]
    allocs = list(
        s.scalars(
            select(models.Allocation).where(
                models.Allocation.resource_pool == pool.pool_name,
                models.Allocation.state.in_((*HELD, AllocationState.PENDING)),
            )
        )
    )
    instances = list(
        s.scalars(
            select(models.Instance).where(
                models.Instance.resource_pool == pool.pool_name, models.Instance.state.in_(LIVE_INSTANCE)
            )
        )
    )
    queued = [a for a in allocs if a.state == AllocationState.PENDING]
    prov = ctx.provisioners.get(pool.pool_name)
    cfg = pool.provider
    out: dict[str, Any] = {
        "name": pool.pool_name,
        "description": pool.description,
        "type": "RESOURCE_POOL_TYPE_DYNAMIC" if cfg else "RESOURCE_POOL_TYPE_STATIC",
        "numAgents": len(agents),
        "slotsAvailable": sum(len(a.slots) for a in agents),
        "slotsUsed": sum(a.slots_needed for a in allocs if a.state in HELD),
        "slotType": "TYPE_CUDA" if any(sl.get("type") == "cuda" for a in agents for sl in a.slots) else "TYPE_CPU",
        "schedulerType": f"SCHEDULER_TYPE_{pool.scheduler.type.upper()}",
        "schedulerFittingPolicy": f"FITTING_POLICY_{pool.scheduler.fitting_policy.upper()}",
        "defaultComputePool": pool.pool_name == ctx.config.default_compute_resource_pool,
        "defaultAuxPool": pool.pool_name == ctx.config.default_aux_resource_pool,
        "preemptible": pool.scheduler.preemption,
        "queuedTasks": len(queued),
        "pendingSlots": sum(a.slots_needed for a in queued),
        "runningTasks": sum(1 for a in allocs if a.state in HELD),
        "numInstances": len(instances),
        "provider": None,
    }
    if cfg is not None:
        out["provider"] = {
            "type": cfg.type,
            "instanceTypes": cfg.instance_types(),
            "maxInstances": cfg.max_instances,
            "minInstances": cfg.min_instances,
            "maxIdleAgentPeriod": cfg.max_idle_agent_period,
            "spot": getattr(cfg, "spot", False),
        }
        out["maxAgents"] = cfg.max_instances
        out["minAgents"] = cfg.min_instances
    if prov is not None:
        st = prov.status
        out["provisioning"] = {
            "lastError": st.last_error,
            "lastErrorAt": st.last_error_at,
            "backoffUntil": st.backoff_until,
            "consecutiveErrors": st.consecutive_errors,
            "lastDecisionAt": st.last_decision_at,
            "unavailable": [
                {"instanceType": t, "spot": sp, "until": until} for (t, sp), until in prov.unavailable.items()
            ],
        }
    return out


def describe(ctx: MasterContext, s: Session, name: str) -> dict[str, Any]:
    pool = ctx.config.pool(name)
    if pool is None:
        raise NotFound(f"resource pool {name!r} not found")
    out = pool_summary(ctx, s, pool)
    out["instances"] = [
        instance_summary(ctx, r)
        for r in s.scalars(
            select(models.Instance)
            .where(models.Instance.resource_pool == name, models.Instance.state.in_(LIVE_INSTANCE))
            .order_by(models.Instance.launched_at)
        )
    ]
    events = s.scalars(
        select(models.Event)
        .where(models.Event.entity_type == "pool", models.Event.entity_id == name)
        .order_by(models.Event.id.desc())
        .limit(20)
    )
    out["recentEvents"] = [{"time": e.time, "level": e.level, "message": e.message} for e in events]
    if pool.provider is not None:
        out["moves"] = moves.recent_moves(s, name)
        out["draining"] = [
            {"instanceId": r.id, "since": r.draining_since, "reason": r.drain_reason}
            for r in s.scalars(
                select(models.Instance).where(
                    models.Instance.resource_pool == name,
                    models.Instance.state.in_(LIVE_INSTANCE),
                    models.Instance.draining_since.is_not(None),
                )
            )
        ]
        out["cost"] = pool_cost(
            pool,
            list(
                s.scalars(
                    select(models.Instance).where(
                        models.Instance.resource_pool == name, models.Instance.state.in_(LIVE_INSTANCE)
                    )
                )
            ),
            out["slotsUsed"],
        )
    return out


def pool_cost(pool: ResourcePoolConfig, instances: list[models.Instance], slots_used: int) -> dict[str, float]:
    """What the pool's instances cost per hour now, against the least its held slots could cost: each
    at the cheapest allowed price per slot-hour (spot prices in a spot pool), perfectly packed."""
    cfg = pool.provider
    assert cfg is not None
    spot_pool = getattr(cfg, "spot", False)

    def price(name: str, spot: bool) -> float:
        return cfg.spot_price_of(name) if spot else cfg.price_of(name)

    per_hour = sum(price(r.instance_type, r.spot) for r in instances)
    per_slot = [price(t, spot_pool) / cfg.slots_of(t) for t in cfg.instance_types() if cfg.slots_of(t) > 0]
    return {"perHour": round(per_hour, 4), "lowerBoundPerHour": round(min(per_slot, default=0.0) * slots_used, 4)}


# What the routers call: each opens its own session.


def summaries(ctx: MasterContext) -> list[dict[str, Any]]:
    with ctx.db.session() as s:
        return [pool_summary(ctx, s, p) for p in ctx.config.resource_pools]


def describe_pool(ctx: MasterContext, name: str) -> dict[str, Any]:
    with ctx.db.session() as s:
        return describe(ctx, s, name)
