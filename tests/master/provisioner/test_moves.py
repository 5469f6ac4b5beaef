"""The move planner in the live provisioner, against the in-memory provider on a manual clock and a real
database: a half-empty instance drains, its trial checkpoints and leaves through the preemption path,
is placed on the other instance and the drained one ends; what never moves; the budget over a restart;
what `pedl resource-pool describe` and the trial's timeline show."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select

from pedl.master.agents import resource_pools
from pedl.master.db import models
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.trials import timeline as trial_timeline
from tests.master.provisioner.test_provisioner import launches, make, register, rows

MOVES = {
    "keep_free_slots": 0,
    "min_saving_per_hour": 0.1,
    "min_trial_runtime_between_moves": 120,
    "checkpoint_cost": 1,
    "restore_cost": 1,
    "max_moves_per_hour": 6,
}
CONFIG = """
name: {name}
entrypoint: python3 train.py
searcher: {{name: single, metric: loss, max_length: 1000}}
resources: {{slots_per_trial: 1, movable: {movable}}}
"""


@pytest.fixture
def loop():
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def submit(ctx, name: str, movable: bool = True) -> int:
    from pedl.master.experiments import service as experiments_service

    def fn(s):
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        return experiments_service.create(
            ctx.controller,
            s,
            owner,
            files=[],
            activate=True,
            config_text=CONFIG.format(name=name, movable=str(movable).lower()),
        ).id

    return ctx.controller.run(fn)


def allocation_of(ctx, exp_id: int) -> models.Allocation:
    with ctx.db.session() as s:
        trial = s.scalar(select(models.Trial).where(models.Trial.experiment_id == exp_id))
        return s.scalar(
            select(models.Allocation)
            .where(models.Allocation.trial_id == trial.id)
            .order_by(models.Allocation.queued_at.desc(), models.Allocation.id.desc())
        )


def start(ctx, exp_id: int) -> models.Allocation:
    alloc = allocation_of(ctx, exp_id)
    ctx.controller.task_started(alloc.assignment[0]["agent_id"], alloc.id)
    return allocation_of(ctx, exp_id)


def progress(ctx, exp_id: int, batches: int, checkpoint: bool = True) -> None:
    """As the trial's reports would leave it: batches trained, and a checkpoint."""
    with ctx.db.session() as s:
        trial = s.scalar(select(models.Trial).where(models.Trial.experiment_id == exp_id))
        trial.total_batches = batches
        if checkpoint:
            trial.latest_checkpoint = f"ckpt-{exp_id}-{batches}"


def advance(ctx, clock, seconds: float) -> None:
    """Time passes; the agents' heartbeats keep them connected."""
    clock.advance(seconds)
    for conn_id in ctx.hub.connected_ids():
        ctx.hub.get(conn_id).last_heartbeat = clock.now()


def two_half_empty_instances(master_config, database, loop, *, movable: bool = True, checkpoint: bool = True):
    """Trials A and B, each alone on a 2-slot instance (a short trial X shared A's and has ended)."""
    ctx, prov, provider, clock = make(
        master_config, database, loop, instance_slots=2, max_idle_agent_period=600, consolidation=MOVES
    )
    a, x = submit(ctx, "a", movable), submit(ctx, "x")
    prov.step()
    (first,) = rows(ctx)
    register(ctx, loop, first, slots=2)
    ctx.controller.tick()
    start(ctx, a), start(ctx, x)
    b = submit(ctx, "b", movable)
    prov.step()
    (second,) = set(rows(ctx)) - {first}
    register(ctx, loop, second, slots=2)
    ctx.controller.tick()
    start(ctx, b)
    done = allocation_of(ctx, x)
    ctx.controller.task_exited(first, done.id, 0, "")
    advance(ctx, clock, 600)
    progress(ctx, a, 100, checkpoint)
    progress(ctx, b, 100, checkpoint)
    return ctx, prov, provider, clock, (a, b), (first, second)


def test_a_half_empty_instance_drains_its_trial_moves_and_the_instance_ends(master_config, database, loop) -> None:
    ctx, prov, provider, clock, (a, b), (first, second) = two_half_empty_instances(master_config, database, loop)
    prov.step()
    moved = allocation_of(ctx, a)
    assert moved.preempt_requested and not allocation_of(ctx, b).preempt_requested
    assert rows(ctx)[first].draining_since == clock.now() and rows(ctx)[second].draining_since is None
    # the trial checkpoints and leaves; placed again, it goes to the other instance, never the draining one
    ctx.controller.task_exited(first, moved.id, 0, "")
    ctx.controller.tick()
    again = allocation_of(ctx, a)
    assert again.id != moved.id and again.assignment[0]["agent_id"] == second
    prov.step()
    assert rows(ctx)[first].state == "TERMINATING" and "drained" in rows(ctx)[first].termination_reason
    assert ("terminate", [first]) in provider.calls
    # visible: the pool's moves, its cost against the bound, and the trial's timeline
    with ctx.db.session() as s:
        pool = resource_pools.describe(ctx, s, "default")
    [move] = pool["moves"]
    assert (move["from"], move["to"], move["allocationId"]) == ([first], [second], moved.id)
    reason = f"moved from instance {first} to {second} to save $"
    assert move["reason"].startswith(reason) and move["savingPerHour"] > 0
    assert pool["cost"]["lowerBoundPerHour"] > 0
    timeline = trial_timeline.timeline(ctx, moved.trial_id)
    assert [t["moved"] for t in timeline] == [move["reason"], None]


def test_a_trial_never_checkpointed_or_opted_out_stays(master_config, database, loop) -> None:
    for kw in ({"checkpoint": False}, {"movable": False}):
        ctx, prov, provider, clock, (a, b), (first, second) = two_half_empty_instances(
            master_config, database, loop, **kw
        )
        prov.step()
        assert not allocation_of(ctx, a).preempt_requested and not allocation_of(ctx, b).preempt_requested
        assert all(r.draining_since is None for r in rows(ctx).values())
        with ctx.db.session() as s:
            assert s.scalar(select(models.TrialMove)) is None
            for table in (
                models.Allocation,
                models.Trial,
                models.Experiment,
                models.TrialMove,
                models.Instance,
                models.Event,
                models.PoolProvisioning,
            ):
                s.execute(table.__table__.delete())


def test_the_budget_counts_moves_made_before_a_restart(master_config, database, loop) -> None:
    ctx, prov, provider, clock, (a, b), (first, second) = two_half_empty_instances(master_config, database, loop)
    with ctx.db.session() as s:  # the hour's budget was spent before the master restarted
        for k in range(MOVES["max_moves_per_hour"]):
            s.add(
                models.TrialMove(
                    resource_pool="default",
                    allocation_id=f"old-{k}",
                    trial_id=None,
                    source="i-x",
                    target="i-y",
                    saving_per_hour=1.0,
                    saving=1.0,
                    reason="earlier",
                    planned_at=clock.now() - 1800,
                )
            )
    # the budget lives in the database: a provisioner with no memory of the moves (a restarted master's)
    fresh = PoolProvisioner(ctx.controller, prov.pool, prov.provider)
    ctx.provisioners["default"] = fresh
    fresh_ctx = ctx
    fresh.step()
    assert not allocation_of(fresh_ctx, a).preempt_requested and not allocation_of(fresh_ctx, b).preempt_requested
    advance(fresh_ctx, clock, 1801)  # an hour after them, the budget is back
    fresh.step()
    assert allocation_of(fresh_ctx, a).preempt_requested or allocation_of(fresh_ctx, b).preempt_requested
    assert len(launches(provider)) == 2  # nothing launched for a move onto an instance already there


def test_spot_first_cordons_the_on_demand_fallback_while_spot_capacity_is_back(master_config, database, loop) -> None:
    """Spot had no capacity: the trial runs on an on-demand fallback. Once spot may be tried again, the
    fallback takes no new work (new trials go to spot) and a spot replacement is asked for its trial."""
    from pedl.config.provider_config import DEFAULT_CAPACITY_RETRY as UNAVAILABLE_FOR
    from pedl.master.provisioner.providers.base import CloudErrorKind

    ctx, prov, provider, clock = make(
        master_config, database, loop, instance_slots=2, max_idle_agent_period=600, spot=True, consolidation=MOVES
    )
    provider.fail_next_launch(CloudErrorKind.CAPACITY)
    a = submit(ctx, "a")
    prov.step()  # the spot launch finds no capacity
    prov.step()  # so the pass falls back to on-demand
    [fallback] = [r for r in rows(ctx).values() if not r.spot]
    register(ctx, loop, fallback.id, slots=2)
    ctx.controller.tick()
    start(ctx, a)
    assert rows(ctx)[fallback.id].cordoned_since is None  # spot is still avoided: the fallback takes work
    advance(ctx, clock, UNAVAILABLE_FOR + 1)
    progress(ctx, a, 100)
    prov.step()
    assert rows(ctx)[fallback.id].cordoned_since == clock.now()
    # a new trial waits for spot instead of taking the fallback's free slot
    b = submit(ctx, "b")
    ctx.controller.tick()
    assert allocation_of(ctx, b).assignment == []
    prov.step()
    spot_launches = [req for req in launches(provider) if req.spot]
    assert len(spot_launches) >= 2  # the first, refused; then capacity for the waiting trial
    with ctx.db.session() as s:
        assert resource_pools.describe(ctx, s, "default")["cost"]["perHour"] > 0
