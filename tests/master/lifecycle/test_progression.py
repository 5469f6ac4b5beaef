"""Experiment progression on a real database with recording effects: what an allocation's end means
for its trial and experiment, fail_unschedulable, the searcher stopping a trial on a validation,
top_up and its `saturated` map, and the user actions kill / pause / activate (experiment_actions.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.cluster import agent_events, placement
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle import allocations, experiment_actions, progression
from pedl.master.lifecycle.states import AllocationState, ExperimentState, TrialState
from pedl.master.trials import service as trials_service
from tests.master.lifecycle.recording_effects import RecordingEffects, agent, allocations_of, experiment, trials_of

A, E, T = AllocationState, ExperimentState, TrialState


@pytest.fixture
def fx(master_config: MasterConfig) -> RecordingEffects:
    return RecordingEffects(config=master_config)


def few_live_trials(master_config: MasterConfig) -> RecordingEffects:
    """Effects whose config lets an empty pool hold one live trial (the default floor is 16)."""
    limits = master_config.limits.model_copy(update={"min_live_trials_per_experiment": 1})
    return RecordingEffects(config=master_config.model_copy(update={"limits": limits}))


def run(
    fx: RecordingEffects, s: Session, alloc: models.Allocation, agent_id: str = "a1", *, contacted: bool = True
) -> None:
    """Place a pending allocation on one slot of `agent_id` and report its process started, the
    way the scheduling pass and the agent's task_started do; unless `contacted` is False the task
    then calls the master, as every trial on the cluster does."""
    s.flush()
    placement.apply(fx, s, AgentHub(), [(alloc.id, [(agent_id, [f"{agent_id}-0"])])])
    assert alloc.state == A.ASSIGNED
    agent_events.task_started(fx, s, agent_id, alloc.id)
    assert alloc.state == A.RUNNING
    if contacted:
        alloc.contacted_at = fx.now


def live(s: Session, trial: models.Trial) -> models.Allocation:
    alloc = allocations.live_allocation(s, trial)
    assert alloc is not None
    return alloc


def running_single(fx: RecordingEffects, s: Session, **kw) -> tuple[models.Experiment, models.Trial, models.Allocation]:
    exp = experiment(fx, s, **kw)
    (trial,) = trials_of(s, exp)
    alloc = live(s, trial)
    run(fx, s, alloc)
    assert trial.state == T.RUNNING
    return exp, trial, alloc


def events(s: Session, kind: str, ident: object) -> list[tuple[str, str]]:
    rows = s.scalars(
        select(models.Event)
        .where(models.Event.entity_type == kind, models.Event.entity_id == str(ident))
        .order_by(models.Event.id)
    )
    return [(e.level, e.message) for e in rows]


# -- allocation_ended: the outcome table -------------------------------------------------------------


def test_exit_0_completes_the_trial_and_the_single_searchers_experiment(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        fx.clock.advance(30)
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert (alloc.state, alloc.exit_code, alloc.exit_reason) == (A.TERMINATED, 0, "exited with code 0")
        assert fx.closed == [alloc.id]
        assert (trial.state, trial.end_time) == (T.COMPLETED, fx.now)
        assert (exp.state, exp.end_time, exp.progress) == (E.COMPLETED, fx.now, 1.0)
        assert exp.id in fx.gc_wanted and set(fx.gc_wanted) == {exp.id}
        assert len(allocations_of(s, trial)) == 1  # nothing queued again


def test_exit_0_without_ever_calling_the_master_completes_with_a_log_line_saying_so(
    fx: RecordingEffects, database: Database
) -> None:
    # as Determined: a script with no Core API (or in its dummy mode) reported nothing and exited 0
    with database.session() as s:
        exp = experiment(fx, s)
        (trial,) = trials_of(s, exp)
        alloc = live(s, trial)
        run(fx, s, alloc, contacted=False)
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert trial.state == T.COMPLETED and trial.restarts == 0
        assert trial.end_reason == "completed without ever calling the master"
        assert exp.state == E.COMPLETED
        assert len(allocations_of(s, trial)) == 1
        lines = list(s.scalars(select(models.TaskLog).where(models.TaskLog.trial_id == trial.id)))
        assert [(line.level, "without ever calling the master" in line.message) for line in lines] == [
            ("LOG_LEVEL_WARNING", True)
        ]
        assert "/run/determined/info" in lines[0].message


def test_exit_0_without_a_call_after_earlier_reports_still_completes(fx: RecordingEffects, database: Database) -> None:
    # a restarted trial that had reported before keeps the benefit of the doubt
    with database.session() as s:
        exp, trial, _ = running_single(fx, s)
        trial.total_batches = 10
        alloc = live(s, trial)
        alloc.contacted_at = None
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert trial.state == T.COMPLETED


def test_preempted_exit_0_queues_the_trial_again_as_run_2(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        allocations.preempt(fx, s, alloc, "preempted for a more urgent trial")
        assert alloc.preempt_requested and fx.preempt_signals == {alloc.id}
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert trial.state == T.QUEUED and trial.run_id == 2
        first, second = allocations_of(s, trial)
        assert first.id == alloc.id and first.state == A.TERMINATED
        assert (second.id, second.state) == (f"{trial.task_id}.2", A.PENDING)
        assert fx.preempt_signals == set()  # the signal died with the allocation
        assert exp.state == E.ACTIVE and fx.gc_wanted == []


def test_preempted_exit_0_pauses_the_trial_of_a_paused_experiment(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        experiment_actions.pause(fx, s, exp)
        assert exp.state == E.PAUSED and alloc.preempt_requested and trial.state == T.RUNNING
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert trial.state == T.PAUSED
        assert [a.id for a in allocations_of(s, trial)] == [alloc.id]  # no new allocation while paused


def test_preempted_exit_0_at_the_target_length_completes(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        assert trial.target_length == 10
        trial.total_batches = 10  # what the trial reported before it was asked to leave
        allocations.preempt(fx, s, alloc, "preempted for a more urgent trial")
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert trial.state == T.COMPLETED and exp.state == E.COMPLETED
        assert len(allocations_of(s, trial)) == 1


def test_a_failure_with_restarts_left_restarts_the_trial(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s, restarts=2)
        progression.allocation_ended(fx, s, alloc, 1, "boom")
        assert alloc.exit_reason == "exited with code 1: boom"
        assert (trial.state, trial.restarts, trial.run_id) == (T.QUEUED, 1, 2)
        assert ("warning", "failed (exited with code 1: boom); restart 1 of 2") in events(s, "trial", trial.id)
        assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]
        logged = s.scalars(select(models.TaskLog.message).where(models.TaskLog.allocation_id == alloc.id)).all()
        assert logged == [f"allocation {alloc.id} exited with code 1: boom: resources failed with non-zero exit code\n"]
        assert exp.state == E.ACTIVE


def test_a_failure_without_restarts_left_errors_the_trial_and_the_experiment(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s, restarts=0)
        progression.allocation_ended(fx, s, alloc, 1, "boom")
        assert trial.state == T.ERROR and trial.restarts == 0
        assert trial.end_reason == "failed after 0 restart(s): exited with code 1: boom"
        assert exp.state == E.ERROR
        assert exp.end_reason == f"all 1 trial(s) failed; trial {trial.id}: {trial.end_reason}"
        assert len(allocations_of(s, trial)) == 1
        assert set(fx.gc_wanted) == {exp.id}


def test_a_start_never_delivered_queues_again_without_counting_a_restart(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp = experiment(fx, s, restarts=0)  # a counted failure would end the trial in ERROR
        (trial,) = trials_of(s, exp)
        alloc = live(s, trial)
        s.flush()
        placement.apply(fx, s, AgentHub(), [(alloc.id, [("a1", ["a1-0"])])])
        assert alloc.state == A.ASSIGNED
        progression.allocation_ended(fx, s, alloc, None, allocations.NOT_STARTED)
        assert alloc.exit_reason == allocations.NOT_STARTED
        assert (trial.state, trial.restarts, trial.run_id) == (T.QUEUED, 0, 2)
        assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]
        assert exp.state == E.ACTIVE


def test_a_killed_trial_is_canceled_and_the_searcher_goes_on(master_config: MasterConfig, database: Database) -> None:
    fx = few_live_trials(master_config)
    with database.session() as s:
        exp = experiment(fx, s, searcher="random", extra=", max_trials: 3")
        (trial,) = trials_of(s, exp)  # the empty pool has room for one
        alloc = live(s, trial)
        run(fx, s, alloc)
        trials_service.kill(fx, s, trial.id)
        assert trial.state == T.STOPPING_CANCELED and alloc.kill_requested
        assert fx.sent_types("a1") == ["start_task", "kill_task"]
        progression.allocation_ended(fx, s, alloc, 137, "killed")
        assert (trial.state, trial.end_time) == (T.CANCELED, fx.now)
        assert exp.searcher_state["state"]["closed"] == ["r0"]
        first, second = trials_of(s, exp)
        assert (second.request_id, second.state) == ("r1", T.QUEUED)  # the searcher filled the room it left
        assert exp.state == E.ACTIVE
        # a kill is not a failure of the task: no error line in its log
        assert s.scalars(select(models.TaskLog).where(models.TaskLog.allocation_id == alloc.id)).all() == []


# -- fail_unschedulable ----------------------------------------------------------------------------


def test_an_unschedulable_trial_errors_and_its_experiment_says_why(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp = experiment(fx, s)
        (trial,) = trials_of(s, exp)
        alloc = live(s, trial)
        progression.fail_unschedulable(fx, s, alloc, "no instance type has 1 slot")
        assert alloc.state == A.TERMINATED and fx.closed == [alloc.id]
        assert trial.state == T.ERROR
        assert trial.end_reason == "can never be scheduled: no instance type has 1 slot"
        assert ("error", f"trial {trial.id} can never be scheduled: no instance type has 1 slot") in events(
            s, "experiment", exp.id
        )
        assert exp.state == E.ERROR  # its only trial failed


# -- the user actions ------------------------------------------------------------------------------


def two_trials(
    fx: RecordingEffects, s: Session
) -> tuple[models.Experiment, models.Trial, models.Allocation, models.Trial, models.Allocation]:
    """An experiment with a running trial (on agent a1) and a pending one."""
    exp = experiment(fx, s, searcher="random", extra=", max_trials: 2")
    running, pending = trials_of(s, exp)
    ra, pa = live(s, running), live(s, pending)
    run(fx, s, ra)
    assert pa.state == A.PENDING
    return exp, running, ra, pending, pa


def test_kill_cancels_pending_trials_at_once_and_the_experiment_when_the_last_run_ends(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp, running, ra, pending, pa = two_trials(fx, s)
        experiment_actions.kill(fx, s, exp)
        assert exp.state == E.STOPPING_CANCELED
        assert (pending.state, pa.state) == (T.CANCELED, A.TERMINATED)
        assert (running.state, ra.state, ra.kill_requested) == (T.STOPPING_CANCELED, A.TERMINATING, True)
        assert fx.sent[-1][0] == "a1" and fx.sent[-1][1].type == "kill_task"
        assert fx.sent[-1][1].allocation_id == ra.id
        fx.clock.advance(5)
        progression.allocation_ended(fx, s, ra, 137, "killed")
        assert (running.state, running.end_time) == (T.CANCELED, fx.now)
        assert (exp.state, exp.end_time) == (E.CANCELED, fx.now)
        assert exp.id in fx.gc_wanted
        assert len(trials_of(s, exp)) == 2  # the searcher made no replacement for the canceled trials


def test_pause_drops_pending_runs_preempts_running_ones_and_activate_queues_them_again(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp, running, ra, pending, pa = two_trials(fx, s)
        experiment_actions.pause(fx, s, exp)
        assert exp.state == E.PAUSED
        assert (pending.state, pa.state) == (T.PAUSED, A.TERMINATED)
        assert (running.state, ra.state, ra.preempt_requested) == (T.RUNNING, A.RUNNING, True)
        assert fx.preempt_signals == {ra.id}
        progression.allocation_ended(fx, s, ra, 0, "")
        assert running.state == T.PAUSED
        experiment_actions.activate(fx, s, exp)
        assert exp.state == E.ACTIVE
        for trial in (running, pending):
            assert (trial.state, trial.run_id) == (T.QUEUED, 2)
            assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]


def test_every_ended_trial_and_experiment_says_why(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        progression.allocation_ended(fx, s, alloc, 0, "")
        assert (trial.state, trial.end_reason) == (T.COMPLETED, "completed")
        assert (exp.state, exp.end_reason) == (E.COMPLETED, "the searcher finished: 1 trial(s) completed")

        exp, running, ra, pending, _pa = two_trials(fx, s)
        experiment_actions.kill(fx, s, exp)
        progression.allocation_ended(fx, s, ra, 137, "killed")
        assert (running.end_reason, pending.end_reason) == ("experiment killed", "experiment killed")
        assert (exp.state, exp.end_reason) == (E.CANCELED, "killed")


def test_an_error_or_a_kill_keeps_the_progress_reached_and_completion_is_all_of_it(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)  # max_length 10 batches, no restarts
        trial.total_batches = 4
        progression.allocation_ended(fx, s, alloc, 1, "boom")
        assert (exp.state, exp.progress) == (E.ERROR, pytest.approx(0.4))

        exp, running, ra, _pending, _pa = two_trials(fx, s)
        running.summary_metrics = {"progress": 0.5}
        experiment_actions.kill(fx, s, exp)
        progression.allocation_ended(fx, s, ra, 137, "killed")
        assert (exp.state, exp.progress) == (E.CANCELED, pytest.approx(0.25))  # half of one of two trials

        exp, trial, alloc = running_single(fx, s)
        progression.allocation_ended(fx, s, alloc, 0, "")  # it reported nothing, yet completed
        assert (exp.state, exp.progress) == (E.COMPLETED, 1.0)


# -- a validation lets the searcher stop a trial ---------------------------------------------------

# adaptive_asha in one bracket of 2 rungs (2 and 10 batches): with fewer than `divisor` (4) results
# at a rung only the best so far goes on, so the second trial to report a worse metric is stopped
ASHA = ", max_trials: 4, mode: aggressive"


def test_a_searcher_stops_a_running_trial_after_a_worse_validation(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp = experiment(fx, s, searcher="adaptive_asha", extra=ASHA)
        best, worse, *_ = trials_of(s, exp)
        alloc = live(s, worse)
        run(fx, s, alloc)
        progression.on_validation(fx, s, best, 1.0, 2)
        assert best.state == T.QUEUED and best.end_reason is None  # the leader goes on
        progression.on_validation(fx, s, worse, 2.0, 2)
        assert worse.state == T.STOPPING_COMPLETED
        assert worse.end_reason.startswith("stopped early by the searcher: stopped at rung 1 of 2 (2 batches")
        assert alloc.preempt_requested and fx.preempt_signals == {alloc.id}
        progression.allocation_ended(fx, s, alloc, 0, "")  # it checkpointed and left
        assert worse.state == T.COMPLETED
        assert len(allocations_of(s, worse)) == 1
        assert exp.searcher_state["state"]["closed"] == [worse.request_id]


def test_a_searcher_stop_completes_a_trial_still_waiting(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp = experiment(fx, s, searcher="adaptive_asha", extra=ASHA)
        best, worse, *_ = trials_of(s, exp)
        alloc = live(s, worse)
        progression.on_validation(fx, s, best, 1.0, 2)
        progression.on_validation(fx, s, worse, 2.0, 2)
        assert (worse.state, alloc.state) == (T.COMPLETED, A.TERMINATED)
        assert worse.end_reason.startswith("stopped early by the searcher: ")


def test_a_searcher_stop_leaves_a_trial_being_killed_alone(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp = experiment(fx, s, searcher="adaptive_asha", extra=ASHA)
        best, worse, *_ = trials_of(s, exp)
        alloc = live(s, worse)
        run(fx, s, alloc)
        trials_service.kill(fx, s, worse.id)
        assert worse.state == T.STOPPING_CANCELED
        progression.on_validation(fx, s, best, 1.0, 2)
        progression.on_validation(fx, s, worse, 2.0, 2)  # its last report before it exits
        assert worse.state == T.STOPPING_CANCELED
        progression.allocation_ended(fx, s, alloc, 137, "killed")
        assert worse.state == T.CANCELED


def test_a_validation_stops_nothing_for_a_searcher_that_never_stops(fx: RecordingEffects, database: Database) -> None:
    with database.session() as s:
        exp, trial, alloc = running_single(fx, s)
        progression.on_validation(fx, s, trial, 5.0, 2)
        assert trial.state == T.RUNNING and not alloc.preempt_requested
        assert exp.searcher_state["state"]["best"] == {trial.request_id: 5.0}


# -- top_up ----------------------------------------------------------------------------------------


def test_top_up_creates_trials_when_room_appears(master_config: MasterConfig, database: Database) -> None:
    fx = few_live_trials(master_config)
    with database.session() as s:
        exp = experiment(fx, s, searcher="random", extra=", max_trials: 4")
        assert [t.request_id for t in trials_of(s, exp)] == ["r0"]  # an empty pool: room for one
        saturated: dict[int, tuple[int, int]] = {}
        progression.top_up(fx, s, saturated)
        assert len(trials_of(s, exp)) == 1 and saturated == {}  # no room yet: not even asked
        agent(s, "a1", slots=3)
        saturated[exp.id] = (1, 1)  # what an earlier pass saw; the capacity has changed since
        progression.top_up(fx, s, saturated)
        trials = trials_of(s, exp)
        assert [t.request_id for t in trials] == ["r0", "r1", "r2"]
        assert all(live(s, t).state == A.PENDING for t in trials)
        assert saturated == {}  # it created trials: no longer saturated


def test_top_up_records_an_experiment_that_created_nothing_and_skips_it_while_unchanged(
    fx: RecordingEffects, database: Database
) -> None:
    # adaptive_asha (max_trials 16, 10 batches): brackets of 11 and 5 trials with 5 live each, so
    # 10 live trials where the empty pool's floor is 16
    with database.session() as s:
        exp = experiment(fx, s, searcher="adaptive_asha", extra=", max_trials: 16")
        assert len(trials_of(s, exp)) == 10
        saturated: dict[int, tuple[int, int]] = {}
        progression.top_up(fx, s, saturated)
        assert len(trials_of(s, exp)) == 10
        assert saturated == {exp.id: (10, 16)}
        # a searcher that now could create more (brackets of 8 live each, capacity still 16) is
        # not asked while (live, capacity) is what the last pass recorded
        exp.config = {**exp.config, "searcher": {**exp.config["searcher"], "max_concurrent_trials": 16}}
        s.flush()
        progression.top_up(fx, s, saturated)
        assert len(trials_of(s, exp)) == 10 and saturated == {exp.id: (10, 16)}
        agent(s, "a1", slots=20)  # capacity 16 -> min(20, max_concurrent 16): unchanged, still skipped
        progression.top_up(fx, s, saturated)
        assert len(trials_of(s, exp)) == 10
        saturated.clear()  # forgetting it makes the next pass ask the searcher
        progression.top_up(fx, s, saturated)
        assert len(trials_of(s, exp)) == 13 and saturated == {}


def test_top_up_looks_again_when_the_capacity_changes_and_forgets_finished_experiments(
    fx: RecordingEffects, database: Database
) -> None:
    with database.session() as s:
        exp = experiment(fx, s, searcher="adaptive_asha", extra=", max_trials: 16")
        saturated: dict[int, tuple[int, int]] = {}
        progression.top_up(fx, s, saturated)
        assert saturated == {exp.id: (10, 16)}
        agent(s, "a1", slots=20)
        progression.top_up(fx, s, saturated)
        assert saturated == {exp.id: (10, 20)}  # asked again (the capacity grew), created nothing again
        experiment_actions.kill(fx, s, exp)
        progression.top_up(fx, s, saturated)
        assert saturated == {}
