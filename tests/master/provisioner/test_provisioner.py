"""The provisioner against the in-memory provider, on a manual clock and a real database:
launch on demand, adoption, idle and starting timeouts, backoff, spot fallback, never-fit."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.common.agent_protocol import Register, SlotInfo
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.db import models
from pedl.master.experiments import service as experiments_service
from pedl.master.identity import users as users_service
from pedl.master.provisioner.providers.base import CloudErrorKind
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.wiring import build_context
from tests.support.memory_provider import MemoryProvider

CONFIG = """
name: p
entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: 10}
resources: {slots_per_trial: %d}
"""


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def make(master_config: MasterConfig, database, loop, **provider_kw):
    clock = ManualClock(1_000_000.0)
    provider_cfg = AWSProviderConfig(
        type="aws",
        image_id="ami-1",
        ssh_key_name="k",
        master_url="http://m:8080",
        instance_type=provider_kw.pop("instance_type", "g4dn.xlarge"),
        **{
            "max_idle_agent_period": 60,
            "max_agent_starting_period": 300,
            "launch_error_backoff": 5,
            "launch_error_backoff_max": 20,
            **provider_kw,
        },
    )
    pool = ResourcePoolConfig(pool_name="default", provider=provider_cfg)
    config = master_config.model_copy(update={"resource_pools": [pool]})
    ctx = build_context(config, database, clock, cluster_id="c1")
    provider = MemoryProvider(clock)
    prov = PoolProvisioner(ctx.controller, pool, provider)
    ctx.provisioners["default"] = prov
    with database.session() as s:
        users_service.ensure_default_users(s, clock.now())
    return ctx, prov, provider, clock


def submit(ctx, slots: int = 1) -> int:
    ctl = ctx.controller

    def fn(s):
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        return experiments_service.create(ctl, s, owner, config_text=CONFIG % slots, files=[], activate=True).id

    return ctl.run(fn)


def register(ctx, loop, agent_id: str, slots: int = 1) -> None:
    conn = AgentConnection(
        agent_id=agent_id, master_url="http://m", remote_host="127.0.0.1", loop=loop, last_heartbeat=ctx.clock.now()
    )
    ctx.hub.attach(conn)
    ctx.controller.agent_registered(
        Register(
            agent_id=agent_id,
            hostname="h",
            address="127.0.0.1",
            slots=[SlotInfo(id=str(i), type="cuda") for i in range(slots)],
        ),
        "127.0.0.1",
    )


def rows(ctx) -> dict[str, models.Instance]:
    with ctx.db.session() as s:
        return {r.id: r for r in s.scalars(select(models.Instance))}


def launches(provider: MemoryProvider) -> list:
    return [req for kind, req in provider.calls if kind == "launch"]


def test_waiting_work_launches_once_and_the_agent_makes_it_running(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop)
    submit(ctx)
    prov.step()
    assert len(launches(provider)) == 1
    (row,) = rows(ctx).values()
    assert row.state == "STARTING" and row.instance_type == "g4dn.xlarge" and row.slots == 1
    prov.step()  # still booting: counted as capacity, nothing launched twice
    assert len(launches(provider)) == 1
    register(ctx, loop, row.id)
    assert rows(ctx)[row.id].state == "RUNNING"
    ctx.controller.tick()  # the scheduler places the trial on it
    with ctx.db.session() as s:
        alloc = s.scalar(select(models.Allocation))
        assert alloc.state == "STATE_ASSIGNED" and alloc.assignment[0]["agent_id"] == row.id


def test_idle_instances_end_after_the_grace_period_and_foreign_ones_never(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, max_idle_agent_period=60)
    provider.add_foreign("i-foreign")
    submit(ctx)
    prov.step()
    (inst_id,) = rows(ctx)
    register(ctx, loop, inst_id)
    ctx.controller.tick()
    with ctx.db.session() as s:
        alloc = s.scalar(select(models.Allocation))
    ctx.controller.task_started(inst_id, alloc.id)
    ctx.controller.task_exited(inst_id, alloc.id, 0, "")
    prov.step()  # idle from now
    clock.advance(59)
    prov.step()
    assert inst_id in provider.instances
    clock.advance(2)
    prov.step()
    assert inst_id not in provider.instances
    assert rows(ctx)[inst_id].termination_reason == "idle for more than 60s"
    prov.step()
    assert rows(ctx)[inst_id].state == "TERMINATED"
    assert "i-foreign" in provider.instances and "i-foreign" not in rows(ctx)


def test_a_restarted_master_adopts_tagged_instances(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop)
    submit(ctx)
    prov.step()
    (inst_id,) = rows(ctx)
    with ctx.db.session() as s:  # the master crashed before recording the launch
        s.delete(s.get(models.Instance, inst_id))
    fresh = PoolProvisioner(ctx.controller, prov.pool, provider)
    fresh.step()
    row = rows(ctx)[inst_id]
    assert row.adopted and row.state == "STARTING"
    assert len(launches(provider)) == 1  # the adopted instance covers the demand


def test_instances_that_never_register_are_terminated(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, max_agent_starting_period=300)
    submit(ctx)
    prov.step()
    (inst_id,) = rows(ctx)
    clock.advance(301)
    prov.step()
    assert inst_id not in provider.instances
    assert "did not register" in rows(ctx)[inst_id].termination_reason
    assert len(launches(provider)) == 2  # and the waiting trial gets a replacement


def test_launch_errors_back_off_exponentially_and_are_visible(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(
        master_config, database, loop, launch_error_backoff=5, launch_error_backoff_max=20
    )
    exp_id = submit(ctx)
    provider.fail_next_launch(CloudErrorKind.QUOTA, times=3, code="InstanceLimitExceeded")
    attempts = []
    for _ in range(60):  # one pass a second for a minute
        prov.step()
        attempts.append(len(launches(provider)))
        clock.advance(1)
    # failures at t=0, +5, +15 (backoff 5, 10, 20), success at +35
    assert attempts[0] == 1 and attempts[4] == 1 and attempts[5] == 2 and attempts[15] == 3
    assert attempts[34] == 3 and attempts[35] == 4 and attempts[-1] == 4
    assert len(rows(ctx)) == 1
    assert prov.status.last_error and "InstanceLimitExceeded" in prov.status.last_error
    with ctx.db.session() as s:
        events = [
            e.message
            for e in s.scalars(
                select(models.Event).where(
                    models.Event.entity_type == "experiment", models.Event.entity_id == str(exp_id)
                )
            )
        ]
    assert any("waiting for capacity" in m and "quota" in m for m in events)


def test_spot_capacity_errors_fall_back_to_on_demand_at_once(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, spot=True)
    submit(ctx)
    provider.fail_next_launch(CloudErrorKind.CAPACITY, code="InsufficientInstanceCapacity")
    prov.step()
    prov.step()
    first, second = launches(provider)
    assert first.spot and not second.spot
    (row,) = rows(ctx).values()
    assert not row.spot


def test_a_trial_that_can_never_fit_fails_without_a_launch(master_config, database, loop) -> None:
    ctx, prov, provider, clock = make(master_config, database, loop, max_instances=2)
    exp_id = submit(ctx, slots=3)  # 1-GPU instances, at most 2: 3 slots never fit
    prov.step()
    assert launches(provider) == []
    with ctx.db.session() as s:
        trial = s.scalar(select(models.Trial))
        exp = s.get(models.Experiment, exp_id)
        assert trial.state == "STATE_ERROR" and "no allowed instance type fits" in trial.end_reason
        assert exp.state == "STATE_ERROR"


def test_a_waiting_checkpoint_gc_task_boots_no_instance(master_config, database, loop) -> None:
    """A GC task of no slots waits in a pool with no agent: no demand (pedl boots nothing to delete files;
    the GC worker ends it and the master deletes)."""
    ctx, prov, provider, clock = make(master_config, database, loop)

    def paused_experiment(s) -> int:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        return experiments_service.create(ctx.controller, s, owner, config_text=CONFIG % 1, files=[], activate=False).id

    exp_id = ctx.controller.run(paused_experiment)
    # a task that lists a checkpoint's files (one that deletes must first hold a stored checkpoint)
    job = checkpoint_gc_tasks.Job(
        exp_id, [checkpoint_gc_tasks.Item("0" * 32, "/tmp/nowhere/" + "0" * 32, delete=False)]
    )
    task_id = ctx.controller.run(lambda s: checkpoint_gc_tasks.launch(ctx.controller, s, job).id)
    with ctx.db.session() as s:
        assert s.scalar(select(models.Allocation.state).where(models.Allocation.task_id == task_id)) == "STATE_PENDING"
    prov.step()
    assert launches(provider) == [] and prov.status.pending_slots == 0
