"""Yielding to new work in the live provisioner, against the in-memory provider on a manual clock and
a real database: new work that waits for a booting instance takes the slot of a long checkpointed
trial, which checkpoints, leaves, and resumes on the booting instance; the slot goes to the work it
was freed for, though the trial's experiment is older; what never yields."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from pedl.master.db import models
from pedl.master.trials import timeline as trial_timeline
from tests.master.provisioner.test_moves import advance, allocation_of, loop, progress, start, submit  # noqa: F401
from tests.master.provisioner.test_provisioner import launches, make, register, rows

MOVES = {
    "min_saving_per_hour": 0.1,
    "min_trial_runtime_between_moves": 120,
    "checkpoint_cost": 1,
    "restore_cost": 1,
    "max_moves_per_hour": 6,
    "min_remaining_to_yield": 600,
}


def long_trial_on_the_only_instance(master_config, database, loop, **kw):  # noqa: F811
    """Trial A alone on the pool's one 1-slot instance, 10 minutes in, checkpointed, with 90 minutes
    to go (900 of 1,000 batches left at 100 batches per 10 minutes)."""
    ctx, prov, provider, clock = make(
        master_config, database, loop, max_idle_agent_period=600, consolidation={**MOVES, **kw}
    )
    a = submit(ctx, "a")
    prov.step()
    (first,) = rows(ctx)
    register(ctx, loop, first)
    ctx.controller.tick()
    start(ctx, a)
    advance(ctx, clock, 600)
    progress(ctx, a, 100)
    return ctx, prov, provider, clock, a, first


def new_work_waits_for_a_boot(ctx, prov, provider) -> tuple[int, str]:
    n = submit(ctx, "n")
    ctx.controller.tick()  # no free slot: it waits
    prov.step()  # an instance is launched for it
    assert len(launches(provider)) == 2
    booting = [r.id for r in rows(ctx).values() if r.state == "STARTING"]
    assert len(booting) == 1
    return n, booting[0]


def test_new_work_takes_the_long_trials_slot_and_the_trial_resumes_on_the_booting_instance(
    master_config,
    database,
    loop,  # noqa: F811
) -> None:
    ctx, prov, provider, clock, a, first = long_trial_on_the_only_instance(master_config, database, loop)
    n, second = new_work_waits_for_a_boot(ctx, prov, provider)
    prov.step()  # the next pass sees the boot under way: A yields
    yielding, waiting = allocation_of(ctx, a), allocation_of(ctx, n)
    assert yielding.preempt_requested and waiting.state == "STATE_PENDING"
    with ctx.db.session() as s:
        [move] = s.scalars(select(models.TrialMove)).all()
        assert (move.allocation_id, move.yield_to, move.source, move.target) == (
            yielding.id,
            waiting.id,
            first,
            "booting",
        )
    prov.step()  # a yield under way is counted: no second trial is asked (there is none), no second row
    with ctx.db.session() as s:
        assert len(s.scalars(select(models.TrialMove)).all()) == 1
    # A checkpoints and leaves; its next allocation queues behind the new work, though A's experiment
    # is older: the freed slot goes to the work it was freed for
    advance(ctx, clock, 5)  # the checkpoint takes a few seconds
    ctx.controller.task_exited(first, yielding.id, 0, "")
    ctx.controller.tick()
    assert allocation_of(ctx, n).assignment[0]["agent_id"] == first
    resumed = allocation_of(ctx, a)
    assert resumed.id != yielding.id and resumed.state == "STATE_PENDING"
    register(ctx, loop, second)
    ctx.controller.tick()
    assert allocation_of(ctx, a).assignment[0]["agent_id"] == second
    # the trial's timeline says why its first run ended
    [ended, _] = trial_timeline.timeline(ctx, yielding.trial_id)
    assert ended["moved"] == move.reason and f"yielded its slots on instance {first} to new work" in move.reason


@pytest.mark.parametrize("case", ["never checkpointed", "ends soon", "switched off", "fair share"])
def test_what_does_not_yield(master_config, database, loop, case: str) -> None:  # noqa: F811
    kw = {"yield_to_new_work": False} if case == "switched off" else {}
    if case == "ends soon":
        kw["min_remaining_to_yield"] = 5401  # A has 5,400 s to go
    ctx, prov, provider, clock, a, first = long_trial_on_the_only_instance(master_config, database, loop, **kw)
    if case == "never checkpointed":
        progress(ctx, a, 100, checkpoint=False)
        with ctx.db.session() as s:
            s.scalar(select(models.Trial).where(models.Trial.experiment_id == a)).latest_checkpoint = None
    if case == "fair share":  # the fair-share scheduler orders by share, not arrival: the slot could go back to A
        prov.pool = prov.pool.model_copy(
            update={"scheduler": prov.pool.scheduler.model_copy(update={"type": "fair_share"})}
        )
    new_work_waits_for_a_boot(ctx, prov, provider)
    prov.step()
    assert not allocation_of(ctx, a).preempt_requested
    with ctx.db.session() as s:
        assert s.scalar(select(models.TrialMove)) is None
