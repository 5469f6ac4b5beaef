"""Instances as the API shows them: cost = hours * price, idle time from the pool provisioner,
live ones unless terminated ones are asked for, and the pool filter."""

from __future__ import annotations

import pytest

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.agents import instances as instances_service
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import InstanceState
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.wiring import build_context
from tests.support.memory_provider import MemoryProvider

N = InstanceState
NOW = 1_000_000.0
HOUR = 3600.0


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database) -> MasterContext:
    aws = AWSProviderConfig(
        type="aws", image_id="ami-1", ssh_key_name="k", master_url="http://m:8080", instance_type="g4dn.xlarge"
    )
    pools = [ResourcePoolConfig(pool_name="default", provider=aws), ResourcePoolConfig(pool_name="static")]
    config = master_config.model_copy(update={"resource_pools": pools})
    clock = ManualClock(NOW)
    ctx = build_context(config, database, clock, cluster_id="c-1")
    ctx.provisioners["default"] = PoolProvisioner(ctx.controller, pools[0], MemoryProvider(clock))
    with database.session() as s:
        s.add_all(
            [
                instance(
                    "i-running", "default", N.RUNNING, launched=NOW - 2 * HOUR, price=0.5, registered=NOW - 1.5 * HOUR
                ),
                instance(
                    "i-ended",
                    "default",
                    N.TERMINATED,
                    launched=NOW - 5 * HOUR,
                    price=2.0,
                    terminated=NOW - 2 * HOUR,
                    reason="idle for more than 60s",
                ),
                instance("i-booting", "default", N.STARTING, launched=NOW - 60, price=0.5),
                instance("local-1", "static", N.RUNNING, launched=NOW - 3 * HOUR, price=0.0),
            ]
        )
    return ctx


def instance(
    inst_id: str,
    pool: str,
    state: InstanceState,
    *,
    launched: float,
    price: float,
    registered: float | None = None,
    terminated: float | None = None,
    reason: str | None = None,
) -> models.Instance:
    return models.Instance(
        id=inst_id,
        resource_pool=pool,
        provider="aws",
        instance_type="g4dn.xlarge",
        spot=False,
        state=state,
        slots=1,
        price_per_hour=price,
        launched_at=launched,
        registered_at=registered,
        terminated_at=terminated,
        termination_reason=reason,
    )


def by_id(rows: list[dict]) -> dict[str, dict]:
    return {r["id"]: r for r in rows}


def test_a_summary_costs_its_hours_at_its_price_and_idles_since_the_provisioner_saw_it(ctx: MasterContext) -> None:
    ctx.provisioners["default"].idle_since["i-running"] = NOW - 90  # the provisioner's own record
    with ctx.db.session() as s:
        row = s.get(models.Instance, "i-running")
        assert instances_service.instance_summary(ctx, row) == {
            "id": "i-running",
            "resourcePool": "default",
            "provider": "aws",
            "instanceType": "g4dn.xlarge",
            "spot": False,
            "state": "RUNNING",
            "slots": 1,
            "launchedAt": NOW - 2 * HOUR,
            "registeredAt": NOW - 1.5 * HOUR,
            "terminatedAt": None,
            "terminationReason": None,
            "interruptedAt": None,
            "drainingSince": None,
            "drainReason": None,
            "cordonedSince": None,
            "adopted": False,
            "idleSeconds": 90.0,
            "instanceHours": 2.0,
            "cost": 1.0,
            "pricePerHour": 0.5,
        }


def test_the_cost_grows_with_the_clock_until_the_instance_ends(ctx: MasterContext) -> None:
    ctx.clock.advance(HOUR)
    rows = by_id(instances_service.listing(ctx, None, include_terminated=True))
    assert (rows["i-running"]["instanceHours"], rows["i-running"]["cost"]) == (3.0, 1.5)
    # ended 3 hours after launch: the clock no longer counts
    assert (rows["i-ended"]["instanceHours"], rows["i-ended"]["cost"]) == (3.0, 6.0)
    assert rows["i-ended"]["terminationReason"] == "idle for more than 60s"


def test_idle_seconds_come_from_the_provisioner_of_the_instances_own_pool(ctx: MasterContext) -> None:
    ctx.provisioners["default"].idle_since.update({"i-running": NOW - 30, "local-1": NOW - 30})
    rows = by_id(instances_service.listing(ctx, None, include_terminated=False))
    assert rows["i-running"]["idleSeconds"] == 30.0
    assert rows["i-booting"]["idleSeconds"] is None  # not idle by its provisioner's account
    assert rows["local-1"]["idleSeconds"] is None  # its pool has no provisioner; another pool's does not count


def test_the_listing_holds_live_instances_unless_terminated_ones_are_asked_for(ctx: MasterContext) -> None:
    live = instances_service.listing(ctx, None, include_terminated=False)
    assert [r["id"] for r in live] == ["local-1", "i-running", "i-booting"]  # by launch time
    everything = instances_service.listing(ctx, None, include_terminated=True)
    assert [r["id"] for r in everything] == ["i-ended", "local-1", "i-running", "i-booting"]


def test_the_listing_filters_by_pool(ctx: MasterContext) -> None:
    assert [r["id"] for r in instances_service.listing(ctx, "static", include_terminated=True)] == ["local-1"]
    assert [r["id"] for r in instances_service.listing(ctx, "default", include_terminated=False)] == [
        "i-running",
        "i-booting",
    ]
    assert instances_service.listing(ctx, "no-such-pool", include_terminated=True) == []
