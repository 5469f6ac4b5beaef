"""Allocation operations on a real database with recording effects: new, kill, preempt, one rank's
exit (placement_exited), terminate, and the lookups held_on, agents_of and live_allocation."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.config.master_config import ResourcePoolConfig, SchedulerConfig
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.allocations import Ending
from pedl.master.lifecycle.states import AllocationState
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    assign,
    experiment,
    run_on,
    trials_of,
)

A = AllocationState


def pending(fx: RecordingEffects, s: Session, **kw) -> models.Allocation:
    """The first allocation of a new experiment's only trial (PENDING)."""
    (trial,) = trials_of(s, experiment(fx, s, **kw))
    (alloc,) = allocations_of(s, trial)
    return alloc


def events(s: Session, alloc: models.Allocation) -> list[tuple[str | None, str]]:
    s.flush()
    return [
        (e.to_state, e.message)
        for e in s.scalars(
            select(models.Event)
            .where(models.Event.entity_type == "allocation", models.Event.entity_id == alloc.id)
            .order_by(models.Event.id)
        )
    ]


def master_lines(s: Session, alloc: models.Allocation) -> list[tuple[str, str]]:
    s.flush()
    return [
        (ln.level, ln.message)
        for ln in s.scalars(
            select(models.TaskLog).where(models.TaskLog.allocation_id == alloc.id, models.TaskLog.source == "master")
        )
    ]


def kills(fx: RecordingEffects) -> list[tuple[str, str, str, float]]:
    return [(a, m.allocation_id, m.reason, m.grace_period) for a, m in fx.sent if isinstance(m, proto.KillTask)]


def two_ranks(fx: RecordingEffects, s: Session) -> models.Allocation:
    """A distributed allocation RUNNING on agents a1 (rank 0) and a2 (rank 1)."""
    agent(s, "a1")
    agent(s, "a2")
    alloc = pending(fx, s, slots=2)
    run_on(fx, s, alloc, "a1", "a2")
    fx.sent.clear()
    return alloc


# -- new ---------------------------------------------------------------------------------------


def test_new_queues_a_pending_allocation_for_the_trials_next_run(fx: RecordingEffects, s: Session) -> None:
    exp = experiment(fx, s, slots=2)
    (trial,) = trials_of(s, exp)
    (first,) = allocations_of(s, trial)
    assert (first.id, first.task_id, first.state, first.slots_needed, first.priority, first.resource_pool) == (
        f"{trial.task_id}.1",
        trial.task_id,
        A.PENDING,
        2,
        42,
        "default",
    )
    assert (first.queued_at, first.owner_id, first.assignment, first.session_token_hash) == (
        fx.now,
        exp.owner_id,
        [],
        "",
    )
    assert first.name == f"Trial {trial.id} (Experiment {exp.id})"
    assert events(s, first) == [(A.PENDING, "waiting for 2 slot(s) in pool default")]
    assert fx.wakes == 1

    fx.clock.advance(5)
    second = allocations.new(fx, s, exp, trial)
    assert (second.id, trial.run_id, second.queued_at, fx.wakes) == (f"{trial.task_id}.2", 2, fx.now, 2)


def test_new_takes_the_priority_from_the_config_else_the_pools_default(fx: RecordingEffects, s: Session) -> None:
    pool = ResourcePoolConfig(pool_name="default", scheduler=SchedulerConfig(default_priority=17))
    fx.config = fx.config.model_copy(update={"resource_pools": [pool]})
    exp = experiment(fx, s, resources=", priority: 7")
    (trial,) = trials_of(s, exp)
    assert allocations_of(s, trial)[0].priority == 7
    # a config stored without a priority (as before the API filled it in) takes the pool's default
    exp.config = {**exp.config, "resources": {k: v for k, v in exp.config["resources"].items() if k != "priority"}}
    assert allocations.new(fx, s, exp, trial).priority == 17
    exp.resource_pool = "gone"  # a pool no longer in master.yaml
    assert allocations.new(fx, s, exp, trial).priority == allocations.DEFAULT_PRIORITY == 42


# -- kill --------------------------------------------------------------------------------------


def test_killing_a_pending_allocation_drops_it_without_messages(fx: RecordingEffects, s: Session) -> None:
    alloc = pending(fx, s)
    fx.clock.advance(3)
    allocations.kill(fx, s, alloc, "experiment killed")
    assert (alloc.state, alloc.ended_at, alloc.exit_reason, alloc.kill_requested) == (
        A.TERMINATED,
        fx.now,
        "experiment killed",
        False,
    )
    assert fx.sent == [] and fx.closed == []
    assert events(s, alloc)[-1] == (A.TERMINATED, "experiment killed")


def test_killing_a_running_allocation_sends_kill_task_to_each_running_rank(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"task_kill_grace_period": 3.5})
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "user asked")
    assert (alloc.state, alloc.kill_requested, alloc.ended_at) == (A.TERMINATING, True, None)
    assert kills(fx) == [("a1", alloc.id, "user asked", 3.5), ("a2", alloc.id, "user asked", 3.5)]
    assert events(s, alloc)[-1] == (A.TERMINATING, "user asked")


def test_a_second_kill_signals_again_without_a_second_transition(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "first")
    n_events = len(events(s, alloc))
    allocations.kill(fx, s, alloc, "again")
    assert [k[2] for k in kills(fx)] == ["first", "first", "again", "again"]
    assert len(events(s, alloc)) == n_events and alloc.state == A.TERMINATING


def test_keep_failure_stops_the_ranks_without_calling_it_a_kill(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "rank 0 failed", keep_failure=True)
    assert (alloc.state, alloc.kill_requested) == (A.TERMINATING, False)
    assert [k[0] for k in kills(fx)] == ["a1", "a2"]


def test_killing_a_terminated_allocation_does_nothing(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    run_on(fx, s, alloc, "a1")
    allocations.terminate(fx, s, alloc, 0, "")
    fx.sent.clear()
    n_events = len(events(s, alloc))
    fx.clock.advance(9)
    allocations.kill(fx, s, alloc, "too late")
    assert (alloc.state, alloc.kill_requested, alloc.exit_reason) == (A.TERMINATED, False, "exited with code 0")
    assert fx.sent == [] and len(events(s, alloc)) == n_events


# -- preempt -----------------------------------------------------------------------------------


def test_preempting_a_pending_allocation_drops_it(fx: RecordingEffects, s: Session) -> None:
    alloc = pending(fx, s)
    allocations.preempt(fx, s, alloc, "spot interruption")
    assert (alloc.state, alloc.exit_reason, alloc.preempt_requested) == (A.TERMINATED, "spot interruption", False)
    assert fx.preempt_signals == set() and fx.sent == []


@pytest.mark.parametrize("started", [False, True], ids=["assigned", "running"])
def test_preempting_a_placed_allocation_signals_it_once(fx: RecordingEffects, s: Session, started: bool) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    (run_on if started else assign)(fx, s, alloc, "a1")
    state = alloc.state
    fx.sent.clear()
    allocations.preempt(fx, s, alloc, "a more urgent trial")
    allocations.preempt(fx, s, alloc, "asked twice")
    assert (alloc.state, alloc.preempt_requested) == (state, True)
    assert fx.preempt_signals == {alloc.id} and fx.sent == []
    assert [m for _, m in events(s, alloc) if m.startswith("preemption")] == [
        "preemption requested: a more urgent trial"
    ]


def test_a_terminating_allocation_is_not_preempted(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "killed")
    allocations.preempt(fx, s, alloc, "late")
    assert (alloc.preempt_requested, fx.preempt_signals) == (False, set())


# -- placement_exited --------------------------------------------------------------------------


def test_a_single_placement_ends_the_allocation_at_once(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    run_on(fx, s, alloc, "a1")
    before = alloc.assignment
    fx.sent.clear()
    assert allocations.placement_exited(fx, s, alloc, "a1", 3, "oom") == Ending(3, "oom")
    assert alloc.assignment == before and alloc.state == A.RUNNING and fx.sent == []


def test_the_first_failed_rank_stops_the_others_and_is_named_as_the_cause(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    assert allocations.placement_exited(fx, s, alloc, "a2", 1, "CUDA error") is None
    # rank 1 failed first: rank 0 is stopped, which is not a kill of the trial
    assert (alloc.state, alloc.kill_requested) == (A.TERMINATING, False)
    assert [(k[0], k[1]) for k in kills(fx)] == [("a1", alloc.id)]
    assert "rank on agent a2 ended (1)" in kills(fx)[0][2]
    assert allocations.agents_of(alloc, running_only=True) == ["a1"]
    ending = allocations.placement_exited(fx, s, alloc, "a1", 143, "terminated")
    assert ending == Ending(1, "rank 1 on agent a2: CUDA error")
    assert len(kills(fx)) == 1  # the second failure sends no more kills to exited ranks


def test_a_repeated_exit_report_of_a_rank_is_ignored(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "user asked")  # a kill: ranks' failures stop no one else
    fx.sent.clear()
    assert allocations.placement_exited(fx, s, alloc, "a1", 137, "") is None
    assert allocations.placement_exited(fx, s, alloc, "a1", 0, "again") is None
    assert fx.sent == []
    assert [(p.get("exited"), p.get("exit_code"), p.get("order")) for p in alloc.assignment] == [
        (True, 137, 0),
        (None, None, None),
    ]
    assert allocations.placement_exited(fx, s, alloc, "a2", 137, "") == Ending(137, "rank 0 on agent a1")


def test_all_ranks_exiting_zero_end_the_allocation_with_zero(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    assert allocations.placement_exited(fx, s, alloc, "a1", 0, "") is None
    assert fx.sent == [] and alloc.state == A.RUNNING
    assert allocations.placement_exited(fx, s, alloc, "a2", 0, "done") == Ending(0, "")


# -- terminate ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_code", "reason", "why"),
    [
        (0, "ignored", "exited with code 0"),
        (None, "agent a1 was lost", "agent a1 was lost"),
        (None, "", "ended before its process ran"),
        (3, "oom", "exited with code 3: oom"),
        (3, "", "exited with code 3"),
    ],
)
def test_terminate_records_how_it_ended(
    fx: RecordingEffects, s: Session, exit_code: int | None, reason: str, why: str
) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    run_on(fx, s, alloc, "a1")
    fx.sent.clear()
    fx.clock.advance(60)
    assert allocations.terminate(fx, s, alloc, exit_code, reason) == why
    assert (alloc.state, alloc.ended_at, alloc.exit_code, alloc.exit_reason) == (A.TERMINATED, fx.now, exit_code, why)
    assert events(s, alloc)[-1] == (A.TERMINATED, why)
    assert fx.closed == [alloc.id]
    assert fx.sent == []  # a single process: it has ended already
    # a non-zero exit in Determined's words too (what det's e2e suite looks for); a lost agent gave no exit code
    said = ": resources failed with non-zero exit code" if exit_code is not None else ""
    assert master_lines(s, alloc) == (
        [] if exit_code == 0 else [("LOG_LEVEL_ERROR", f"allocation {alloc.id} {why}{said}\n")]
    )


def test_terminate_logs_no_failure_of_a_killed_allocation(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    run_on(fx, s, alloc, "a1")
    allocations.kill(fx, s, alloc, "user asked")
    assert allocations.terminate(fx, s, alloc, 137, "killed") == "exited with code 137: killed"
    assert alloc.state == A.TERMINATED and master_lines(s, alloc) == []


def test_terminate_stops_ranks_still_running_elsewhere(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"task_kill_grace_period": 2.0})
    alloc = two_ranks(fx, s)
    allocations.kill(fx, s, alloc, "user asked")
    allocations.placement_exited(fx, s, alloc, "a1", 137, "")
    fx.sent.clear()
    # the master gives up on rank 1 (its agent was lost): it is told to stop should it come back
    why = allocations.terminate(fx, s, alloc, None, "agent a2 was lost")
    assert kills(fx) == [("a2", alloc.id, why, 2.0)]
    assert alloc.state == A.TERMINATED and fx.closed == [alloc.id]


# -- lookups -----------------------------------------------------------------------------------


def test_agents_of_lists_the_placements_and_those_still_running(fx: RecordingEffects, s: Session) -> None:
    alloc = two_ranks(fx, s)
    assert allocations.agents_of(alloc) == ["a1", "a2"]
    allocations.placement_exited(fx, s, alloc, "a2", 0, "")
    assert allocations.agents_of(alloc) == ["a1", "a2"]
    assert allocations.agents_of(alloc, running_only=True) == ["a1"]
    assert allocations.agents_of(pending(fx, s)) == []


def test_held_on_finds_the_allocations_holding_slots_on_an_agent(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1", slots=4)
    agent(s, "a2")
    assigned, running, terminating, ended, elsewhere, waiting = (pending(fx, s) for _ in range(6))
    assign(fx, s, assigned, "a1")
    for alloc in (running, terminating, ended):
        run_on(fx, s, alloc, "a1")
    allocations.kill(fx, s, terminating, "stop")
    allocations.terminate(fx, s, ended, 0, "")
    run_on(fx, s, elsewhere, "a2")
    s.flush()
    assert sorted(a.id for a in allocations.held_on(s, "a1")) == sorted([assigned.id, running.id, terminating.id])
    assert [a.id for a in allocations.held_on(s, "a2")] == [elsewhere.id]
    assert allocations.held_on(s, "a3") == [] and waiting.state == A.PENDING


def test_live_allocation_is_the_trials_allocation_not_yet_terminated(fx: RecordingEffects, s: Session) -> None:
    exp = experiment(fx, s)
    (trial,) = trials_of(s, exp)
    (first,) = allocations_of(s, trial)
    s.flush()
    assert allocations.live_allocation(s, trial) is first
    allocations.kill(fx, s, first, "dropped")
    s.flush()
    assert allocations.live_allocation(s, trial) is None
    fx.clock.advance(1)
    second = allocations.new(fx, s, exp, trial)
    s.flush()
    assert allocations.live_allocation(s, trial) is second
