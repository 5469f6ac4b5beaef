"""A master restart (a new controller and provisioner over the same database and the same cloud) keeps
what the provisioner knew: idle clocks, avoided (type, spot) pairs, spot request deadlines, the launch
backoff with its last error, and terminates to send again; the API shows the stored state at once."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from pedl.config.provider_config import DEFAULT_CAPACITY_RETRY as UNAVAILABLE_FOR
from pedl.master.agents import instances as instances_service
from pedl.master.agents import resource_pools
from pedl.master.db import models
from pedl.master.provisioner.providers.base import CloudErrorKind, CloudInstance, CloudState, LaunchRequest
from pedl.master.provisioner.provisioner import TERMINATE_RETRY, PoolProvisioner
from pedl.master.wiring import build_context
from tests.master.provisioner.test_provisioner import launches, make, register, rows, submit
from tests.support.memory_provider import MemoryProvider


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


class SlowCloud(MemoryProvider):
    """Spot requests stay unfulfilled, and terminates are lost while `lose_terminates` is set."""

    lose_terminates = False

    def launch(self, request: LaunchRequest) -> list[CloudInstance]:
        created = super().launch(request)
        if not request.spot:
            return created
        for ci in created:
            self.instances[ci.id].state = CloudState.REQUESTED
        return [self._view(self.instances[ci.id]) for ci in created]

    def terminate(self, ids: list[str]) -> None:
        if self.lose_terminates:
            self.calls.append(("terminate", list(ids)))
            return
        super().terminate(ids)


def restart(ctx, prov: PoolProvisioner):
    """A new master over the same database, clock and cloud: nothing of the old one's memory is passed."""
    fresh_ctx = build_context(ctx.config, ctx.db, ctx.clock, cluster_id="c1")
    fresh = PoolProvisioner(fresh_ctx.controller, prov.pool, prov.provider)
    fresh_ctx.provisioners["default"] = fresh
    return fresh_ctx, fresh


def provisioning(ctx) -> dict:
    """The pool's provisioning block as `pedl resource-pool describe` gets it."""
    with ctx.db.session() as s:
        return resource_pools.describe(ctx, s, "default")["provisioning"]


def run_one_task(ctx, loop, inst_id: str) -> None:
    register(ctx, loop, inst_id)
    ctx.controller.tick()
    with ctx.db.session() as s:
        alloc = s.scalar(select(models.Allocation))
    ctx.controller.task_started(inst_id, alloc.id)
    ctx.controller.task_exited(inst_id, alloc.id, 0, "")


def test_an_idle_instance_keeps_its_idle_clock_over_a_restart(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, max_idle_agent_period=60)
    submit(ctx)
    prov.step()
    (inst_id,) = rows(ctx)
    run_one_task(ctx, loop, inst_id)
    prov.step()  # idle from now
    idle_from = clock.now()
    assert rows(ctx)[inst_id].idle_since == idle_from
    clock.advance(40)
    ctx, prov = restart(ctx, prov)
    with ctx.db.session() as s:  # the API counts from the stored clock before the first pass
        assert instances_service.instance_summary(ctx, s.get(models.Instance, inst_id))["idleSeconds"] == 40
    register(ctx, loop, inst_id)  # the agent reconnects to the new master
    prov.step()
    assert inst_id in provider.instances
    assert rows(ctx)[inst_id].idle_since == idle_from  # not reset by the restart
    clock.advance(21)  # idle_from + 61: past max_idle counted from before the restart
    prov.step()
    assert inst_id not in provider.instances
    assert rows(ctx)[inst_id].termination_reason == "idle for more than 60s"
    prov.step()
    row = rows(ctx)[inst_id]
    assert row.state == "TERMINATED" and row.idle_since is None


def test_a_type_out_of_capacity_stays_avoided_over_a_restart_until_its_time(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, spot=True)
    submit(ctx)
    provider.fail_next_launch(CloudErrorKind.CAPACITY, code="InsufficientInstanceCapacity")
    failed_at = clock.now()
    prov.step()
    assert [r.spot for r in launches(provider)] == [True]
    ctx, prov = restart(ctx, prov)
    assert prov.unavailable == {("g4dn.xlarge", True): failed_at + UNAVAILABLE_FOR}
    shown = provisioning(ctx)
    assert shown["unavailable"] == [{"instanceType": "g4dn.xlarge", "spot": True, "until": failed_at + UNAVAILABLE_FOR}]
    assert "InsufficientInstanceCapacity" in shown["lastError"] and shown["lastErrorAt"] == failed_at
    assert shown["consecutiveErrors"] == 1 and shown["backoffUntil"] is None  # capacity: another option at once
    prov.step()
    assert [r.spot for r in launches(provider)] == [True, False]  # on demand: spot is still out
    clock.advance(UNAVAILABLE_FOR - 1)
    ctx, prov = restart(ctx, prov)
    assert set(prov.unavailable) == {("g4dn.xlarge", True)}
    clock.advance(2)
    ctx, prov = restart(ctx, prov)
    assert prov.unavailable == {} and provisioning(ctx)["unavailable"] == []


def test_a_spot_request_times_out_from_its_launch_and_its_failure_is_kept(master_config, database, loop) -> None:
    ctx, prov, _, clock = make(master_config, database, loop, spot=True, spot_request_timeout=120)
    provider = prov.provider = SlowCloud(clock)
    submit(ctx)
    prov.step()
    (request_id,) = rows(ctx)
    assert rows(ctx)[request_id].state == "REQUESTED"
    clock.advance(100)
    ctx, prov = restart(ctx, prov)
    prov.step()
    assert len(launches(provider)) == 1 and rows(ctx)[request_id].state == "REQUESTED"
    clock.advance(21)  # 121s after the request, 21s after the restart
    prov.step()
    assert rows(ctx)[request_id].termination_reason == "spot request unfulfilled after 120s"
    assert [r.spot for r in launches(provider)] == [True, False]
    ctx, prov = restart(ctx, prov)
    assert set(prov.unavailable) == {("g4dn.xlarge", True)}


def test_the_launch_backoff_and_its_error_survive_a_restart(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(
        master_config, database, loop, launch_error_backoff=5, launch_error_backoff_max=20
    )
    start = clock.now()
    submit(ctx)
    provider.fail_next_launch(CloudErrorKind.QUOTA, times=3, code="InstanceLimitExceeded")
    prov.step()  # fails: backoff 5
    clock.advance(5)
    prov.step()  # fails: backoff 10
    clock.advance(1)
    ctx, prov = restart(ctx, prov)
    assert (prov.status.backoff_until, prov.status.consecutive_errors) == (start + 15, 2)
    shown = provisioning(ctx)
    assert shown["backoffUntil"] == start + 15 and shown["consecutiveErrors"] == 2
    assert "InstanceLimitExceeded" in shown["lastError"] and shown["lastErrorAt"] == start + 5
    prov.step()
    assert len(launches(provider)) == 2  # still backing off: no launch at restart
    clock.advance(9)  # start + 15
    prov.step()  # the third failure: the backoff doubles from the stored count
    assert len(launches(provider)) == 3
    assert (prov.status.backoff_until, prov.status.consecutive_errors) == (start + 35, 3)
    clock.advance(20)
    prov.step()  # succeeds
    assert len(launches(provider)) == 4 and len(rows(ctx)) == 1
    ctx, prov = restart(ctx, prov)
    shown = provisioning(ctx)
    assert shown["backoffUntil"] is None and shown["consecutiveErrors"] == 0
    assert "InstanceLimitExceeded" in shown["lastError"]  # the last error stays shown


def test_a_terminate_sent_before_a_restart_is_sent_again_after_the_retry_period(master_config, database, loop) -> None:
    ctx, prov, _, clock = make(master_config, database, loop, max_agent_starting_period=300)
    provider = prov.provider = SlowCloud(clock)
    submit(ctx)
    prov.step()
    (inst_id,) = rows(ctx)
    provider.lose_terminates = True
    clock.advance(301)
    prov.step()  # never registered: terminated, but the cloud does not act on it
    sent_at = clock.now()
    assert rows(ctx)[inst_id].state == "TERMINATING" and rows(ctx)[inst_id].terminate_sent_at == sent_at

    def sent() -> int:
        return sum(1 for kind, ids in provider.calls if kind == "terminate" and inst_id in ids)

    assert sent() == 1
    clock.advance(TERMINATE_RETRY / 2)
    ctx, prov = restart(ctx, prov)
    prov.step()
    assert sent() == 1  # not before the retry period, counted from the send before the restart
    clock.advance(TERMINATE_RETRY / 2 + 1)
    provider.lose_terminates = False
    prov.step()
    assert sent() == 2 and inst_id not in provider.instances
    prov.step()
    assert rows(ctx)[inst_id].state == "TERMINATED"
