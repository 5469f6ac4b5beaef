"""The gauges computed at scrape time: each pool's queue, slots, agents, instances and provisioning
backoff, from one short read session plus the provisioners' in-memory status. Bounded work per scrape:
aggregates in SQL, one row per connected agent, labels drawn from bounded sets."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select

from pedl.master.db import models
from pedl.master.lifecycle.states import HELD, LIVE_INSTANCE, AgentState, AllocationState
from pedl.master.observability.master_metrics import market

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from pedl.master.context import MasterContext


@dataclass
class PoolFigures:
    pending_allocations: int = 0
    pending_slots: int = 0
    held_allocations: int = 0
    slots_used: int = 0
    slots_capacity: int = 0
    agents: int = 0


@dataclass
class ClusterFigures:
    pools: dict[str, PoolFigures] = field(default_factory=dict)
    # (pool, instance type, market, state) -> live instances
    instances: dict[tuple[str, str, str, str], int] = field(default_factory=dict)


def read_figures(ctx: MasterContext) -> ClusterFigures:
    """The pools' figures as the API shows them (agents/resource_pools.pool_summary): connected
    agents are those the hub holds too; slots used are what held allocations ask for."""
    out = ClusterFigures(pools={p.pool_name: PoolFigures() for p in ctx.config.resource_pools})

    def pool(name: str) -> PoolFigures:  # rows may name a pool the config no longer has
        return out.pools.setdefault(name, PoolFigures())

    connected = ctx.hub.connected_ids()
    alloc, inst = models.Allocation, models.Instance
    with ctx.db.read_session() as s:
        for name, state, count, slots in s.execute(
            select(alloc.resource_pool, alloc.state, func.count(), func.coalesce(func.sum(alloc.slots_needed), 0))
            .where(alloc.state.in_((*HELD, AllocationState.PENDING)))
            .group_by(alloc.resource_pool, alloc.state)
        ):
            p = pool(name)
            if state == AllocationState.PENDING:
                p.pending_allocations += count
                p.pending_slots += slots
            else:
                p.held_allocations += count
                p.slots_used += slots
        for agent_id, name, slots in s.execute(
            select(models.Agent.id, models.Agent.resource_pool, models.Agent.slots).where(
                models.Agent.state == AgentState.CONNECTED
            )
        ):
            if agent_id in connected:
                p = pool(name)
                p.agents += 1
                p.slots_capacity += len(slots or [])
        for name, itype, spot, state, count in s.execute(
            select(inst.resource_pool, inst.instance_type, inst.spot, inst.state, func.count())
            .where(inst.state.in_(LIVE_INSTANCE))
            .group_by(inst.resource_pool, inst.instance_type, inst.spot, inst.state)
        ):
            key = (name, itype, market(bool(spot)), str(state))
            out.instances[key] = out.instances.get(key, 0) + count
    return out


class PoolStateCollector(Collector):
    """Registered in the master's own registry (master/wiring.py); read on each GET /metrics."""

    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx

    def describe(self) -> list[Metric]:
        return []  # the registry must not collect (and read the database) at registration time

    def collect(self) -> Iterator[Metric]:
        yield from self._pools(read_figures(self.ctx))
        yield from self._provisioners()

    def _pools(self, figures: ClusterFigures) -> Iterator[Metric]:
        gauges = {
            "pending_allocations": ("pedl_pool_pending_allocations", "Allocations waiting for slots (the queue)."),
            "pending_slots": ("pedl_pool_pending_slots", "Slots the waiting allocations ask for."),
            "held_allocations": (
                "pedl_pool_running_allocations",
                "Allocations holding slots (assigned, running or terminating).",
            ),
            "slots_used": ("pedl_pool_slots_used", "Slots held by allocations."),
            "slots_capacity": ("pedl_pool_slots_capacity", "Slots of the pool's connected agents."),
            "agents": ("pedl_pool_agents", "Connected agents."),
        }
        for attr, (name, doc) in gauges.items():
            g = GaugeMetricFamily(name, doc, labels=["pool"])
            for pool_name, p in sorted(figures.pools.items()):
                g.add_metric([pool_name], getattr(p, attr))
            yield g
        g = GaugeMetricFamily(
            "pedl_instances",
            "Live instances, by pool, instance type, market and state.",
            labels=["pool", "instance_type", "market", "state"],
        )
        for key, count in sorted(figures.instances.items()):
            g.add_metric(list(key), count)
        yield g

    def _provisioners(self) -> Iterator[Metric]:
        now = self.ctx.clock.now()
        backoff = GaugeMetricFamily(
            "pedl_provisioner_backoff", "1 while the pool's launches back off after errors.", labels=["pool"]
        )
        remaining = GaugeMetricFamily(
            "pedl_provisioner_backoff_remaining_seconds",
            "Seconds until the pool's launches may be tried again (0 when none).",
            labels=["pool"],
        )
        errors = GaugeMetricFamily(
            "pedl_provisioner_consecutive_errors",
            "Provider errors since the pool's last successful launch.",
            labels=["pool"],
        )
        avoided = GaugeMetricFamily(
            "pedl_provisioner_unavailable",
            "1 for each instance type and market avoided after a capacity error.",
            labels=["pool", "instance_type", "market"],
        )
        for pool_name, prov in sorted(self.ctx.provisioners.items()):
            st = prov.status
            left = max((st.backoff_until or 0.0) - now, 0.0)
            backoff.add_metric([pool_name], 1.0 if left > 0 else 0.0)
            remaining.add_metric([pool_name], left)
            errors.add_metric([pool_name], st.consecutive_errors)
            for (itype, spot), until in sorted(list(prov.unavailable.items())):
                if until > now:
                    avoided.add_metric([pool_name, itype, market(spot)], 1.0)
        yield from (backoff, remaining, errors, avoided)
