"""Instances as the API shows them: cost, idle time and state of each machine a provisioner
launched. The provisioner writes them; this module reads them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle.states import LIVE_INSTANCE

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def instance_summary(ctx: MasterContext, row: models.Instance) -> dict[str, Any]:
    now = ctx.clock.now()
    end = row.terminated_at or now
    prov = ctx.provisioners.get(row.resource_pool)
    idle_since = prov.idle_since.get(row.id) if prov else None
    hours = max(end - row.launched_at, 0.0) / 3600
    return {
        "id": row.id,
        "resourcePool": row.resource_pool,
        "provider": row.provider,
        "instanceType": row.instance_type,
        "spot": row.spot,
        "state": row.state,
        "slots": row.slots,
        "launchedAt": row.launched_at,
        "registeredAt": row.registered_at,
        "terminatedAt": row.terminated_at,
        "terminationReason": row.termination_reason,
        "interruptedAt": row.interrupted_at,
        # consolidation: draining (no new work, ends once empty); cordoned (an on-demand fallback
        # that takes no new work while spot capacity is available)
        "drainingSince": row.draining_since,
        "drainReason": row.drain_reason,
        "cordonedSince": row.cordoned_since,
        "adopted": row.adopted,
        "idleSeconds": (now - idle_since) if idle_since is not None else None,
        "instanceHours": hours,
        "cost": hours * row.price_per_hour,
        "pricePerHour": row.price_per_hour,
    }


def list_instances(ctx: MasterContext, s: Session, pool: str | None, include_terminated: bool) -> list[dict[str, Any]]:
    q = select(models.Instance)
    if pool:
        q = q.where(models.Instance.resource_pool == pool)
    if not include_terminated:
        q = q.where(models.Instance.state.in_(LIVE_INSTANCE))
    return [instance_summary(ctx, r) for r in s.scalars(q.order_by(models.Instance.launched_at))]


def listing(ctx: MasterContext, pool: str | None, include_terminated: bool) -> list[dict[str, Any]]:
    """The instances of one pool or of all, the live ones unless include_terminated."""
    with ctx.db.session() as s:
        return list_instances(ctx, s, pool, include_terminated)
