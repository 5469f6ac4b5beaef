"""The scrape-time gauges against a database with known rows: queue, slots, agents and instances by
pool (only live rows, only agents the hub holds), the provisioners' backoff, the same figures as the
resource-pool API, and a fixed number of queries per scrape however many rows there are."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import event

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.agents import resource_pools
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AgentState, AllocationState, InstanceState
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.wiring import build_context
from tests.support.memory_provider import MemoryProvider

NOW = 1_000_000.0


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database) -> MasterContext:
    aws = AWSProviderConfig(
        type="aws",
        image_id="ami-1",
        ssh_key_name="k",
        master_url="http://m:8080",
        instance_type=["g4dn.xlarge", "p3.2xlarge"],
    )
    pools = [ResourcePoolConfig(pool_name="gpu", provider=aws), ResourcePoolConfig(pool_name="static")]
    config = master_config.model_copy(
        update={"resource_pools": pools, "default_compute_resource_pool": "gpu", "default_aux_resource_pool": "gpu"}
    )
    clock = ManualClock(NOW)
    ctx = build_context(config, database, clock, cluster_id="c1")
    ctx.provisioners["gpu"] = PoolProvisioner(ctx.controller, pools[0], MemoryProvider(clock))
    return ctx


def allocation(n: int, pool: str, state: AllocationState, slots: int) -> models.Allocation:
    return models.Allocation(
        id=f"a{n}",
        task_id=f"t{n}",
        name=f"task {n}",
        state=state,
        resource_pool=pool,
        slots_needed=slots,
        priority=42,
        assignment=[],
        session_token_hash=f"h{n}",
        owner_id=1,
        queued_at=NOW,
    )


def agent(agent_id: str, pool: str, state: AgentState, slots: int) -> models.Agent:
    return models.Agent(
        id=agent_id,
        hostname="h",
        address="127.0.0.1",
        resource_pool=pool,
        slots=[{"id": str(i), "type": "cuda"} for i in range(slots)],
        state=state,
        version="t",
        registered_at=NOW,
        last_heartbeat=NOW,
    )


def instance(inst_id: str, itype: str, spot: bool, state: InstanceState, pool: str = "gpu") -> models.Instance:
    return models.Instance(
        id=inst_id,
        resource_pool=pool,
        provider="aws",
        instance_type=itype,
        spot=spot,
        state=state,
        slots=1,
        launched_at=NOW,
    )


def attach(ctx: MasterContext, loop, agent_id: str) -> None:
    ctx.hub.attach(AgentConnection(agent_id=agent_id, master_url="http://m", remote_host="127.0.0.1", loop=loop))


def fill(ctx: MasterContext, loop) -> None:
    A, G, N = AllocationState, AgentState, InstanceState  # the lifecycle's own short names
    with ctx.db.session() as s:
        s.add_all(
            [
                allocation(1, "gpu", A.PENDING, 2),
                allocation(2, "gpu", A.PENDING, 1),
                allocation(3, "gpu", A.RUNNING, 4),
                allocation(4, "gpu", A.ASSIGNED, 1),
                allocation(5, "gpu", A.TERMINATING, 1),
                allocation(6, "gpu", A.TERMINATED, 8),
                allocation(7, "static", A.RUNNING, 1),
                allocation(8, "retired", A.PENDING, 3),
            ]
        )
        s.add_all(
            [
                agent("g1", "gpu", G.CONNECTED, 4),
                agent("g2", "gpu", G.CONNECTED, 2),
                agent("g3", "gpu", G.CONNECTED, 8),  # the database says connected, the hub does not hold it
                agent("g4", "gpu", G.DISCONNECTED, 8),
                agent("s1", "static", G.CONNECTED, 1),
            ]
        )
        s.add_all(
            [
                instance("i-1", "g4dn.xlarge", True, N.RUNNING),
                instance("i-2", "g4dn.xlarge", True, N.RUNNING),
                instance("i-3", "g4dn.xlarge", False, N.STARTING),
                instance("i-4", "p3.2xlarge", False, N.TERMINATING),
                instance("sir-5", "p3.2xlarge", True, N.REQUESTED),
                instance("i-6", "g4dn.xlarge", True, N.TERMINATED),
            ]
        )
    for agent_id in ("g1", "g2", "g4", "s1"):
        attach(ctx, loop, agent_id)


def sample(ctx: MasterContext, name: str, **labels: str) -> float | None:
    return ctx.metrics.registry.get_sample_value(name, labels)


def test_queue_slots_and_agents_by_pool(ctx: MasterContext, loop) -> None:
    fill(ctx, loop)
    expected = {  # pool: (pending allocations, pending slots, running allocations, slots used, capacity, agents)
        "gpu": (2, 3, 3, 6, 6, 2),
        "static": (0, 0, 1, 1, 1, 1),
        "retired": (1, 3, 0, 0, 0, 0),  # rows of a pool the config no longer has still show
    }
    names = (
        "pedl_pool_pending_allocations",
        "pedl_pool_pending_slots",
        "pedl_pool_running_allocations",
        "pedl_pool_slots_used",
        "pedl_pool_slots_capacity",
        "pedl_pool_agents",
    )
    for pool, figures in expected.items():
        assert tuple(sample(ctx, name, pool=pool) for name in names) == figures, pool


def test_an_empty_configured_pool_shows_zeros(ctx: MasterContext) -> None:
    assert sample(ctx, "pedl_pool_pending_allocations", pool="static") == 0
    assert sample(ctx, "pedl_pool_slots_capacity", pool="gpu") == 0
    assert sample(ctx, "pedl_pool_pending_allocations", pool="retired") is None


def test_live_instances_by_pool_type_market_and_state(ctx: MasterContext, loop) -> None:
    fill(ctx, loop)
    got = {
        tuple(s.labels[k] for k in ("pool", "instance_type", "market", "state")): s.value
        for family in ctx.metrics.registry.collect()
        if family.name == "pedl_instances"
        for s in family.samples
    }
    assert got == {
        ("gpu", "g4dn.xlarge", "spot", "RUNNING"): 2,
        ("gpu", "g4dn.xlarge", "on-demand", "STARTING"): 1,
        ("gpu", "p3.2xlarge", "on-demand", "TERMINATING"): 1,
        ("gpu", "p3.2xlarge", "spot", "REQUESTED"): 1,
    }


def test_the_figures_match_the_resource_pool_api(ctx: MasterContext, loop) -> None:
    fill(ctx, loop)
    with ctx.db.session() as s:
        api = {p.pool_name: resource_pools.pool_summary(ctx, s, p) for p in ctx.config.resource_pools}
    for pool, summary in api.items():
        assert sample(ctx, "pedl_pool_pending_allocations", pool=pool) == summary["queuedTasks"]
        assert sample(ctx, "pedl_pool_pending_slots", pool=pool) == summary["pendingSlots"]
        assert sample(ctx, "pedl_pool_running_allocations", pool=pool) == summary["runningTasks"]
        assert sample(ctx, "pedl_pool_slots_used", pool=pool) == summary["slotsUsed"]
        assert sample(ctx, "pedl_pool_slots_capacity", pool=pool) == summary["slotsAvailable"]
        assert sample(ctx, "pedl_pool_agents", pool=pool) == summary["numAgents"]
    instances = sum(
        s.value
        for family in ctx.metrics.registry.collect()
        if family.name == "pedl_instances"
        for s in family.samples
        if s.labels["pool"] == "gpu"
    )
    assert instances == api["gpu"]["numInstances"] == 5


def test_backoff_and_avoided_offers_come_from_the_provisioner(ctx: MasterContext) -> None:
    prov = ctx.provisioners["gpu"]
    assert sample(ctx, "pedl_provisioner_backoff", pool="gpu") == 0
    assert sample(ctx, "pedl_provisioner_backoff", pool="static") is None  # no provider, no provisioner
    prov.status.backoff_until, prov.status.consecutive_errors = NOW + 30, 2
    prov.unavailable = {("g4dn.xlarge", True): NOW + 100, ("p3.2xlarge", False): NOW - 1}
    assert sample(ctx, "pedl_provisioner_backoff", pool="gpu") == 1
    assert sample(ctx, "pedl_provisioner_backoff_remaining_seconds", pool="gpu") == 30
    assert sample(ctx, "pedl_provisioner_consecutive_errors", pool="gpu") == 2
    assert sample(ctx, "pedl_provisioner_unavailable", pool="gpu", instance_type="g4dn.xlarge", market="spot") == 1
    assert (
        sample(ctx, "pedl_provisioner_unavailable", pool="gpu", instance_type="p3.2xlarge", market="on-demand") is None
    )  # expired
    ctx.clock.advance(31)  # the injected clock decides what is past
    assert sample(ctx, "pedl_provisioner_backoff", pool="gpu") == 0
    assert sample(ctx, "pedl_provisioner_backoff_remaining_seconds", pool="gpu") == 0


def test_a_scrape_runs_a_fixed_number_of_queries(ctx: MasterContext, loop) -> None:
    statements: list[str] = []

    def count(_conn, _cursor, statement, *_args) -> None:
        if statement.lstrip().upper().startswith("SELECT"):
            statements.append(statement)

    engine = ctx.db.read_engine
    event.listen(engine, "before_cursor_execute", count)
    try:
        list(ctx.metrics.registry.collect())
        empty = len(statements)
        fill(ctx, loop)
        with ctx.db.session() as s:
            s.add_all([instance(f"i-x{n}", "g4dn.xlarge", n % 2 == 0, InstanceState.RUNNING) for n in range(200)])
        statements.clear()
        list(ctx.metrics.registry.collect())
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert len(statements) == empty == 3
