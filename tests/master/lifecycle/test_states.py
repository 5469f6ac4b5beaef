"""Lifecycle tables: every allowed edge passes, illegal ones raise IllegalTransition (an internal 500),
terminal states have no exits but continuing (experiments, trials) and deleting (experiments)."""

from __future__ import annotations

import itertools
from enum import StrEnum

import pytest

from pedl.errors import HTTP_STATUS, Conflict, ErrorCode
from pedl.master.db import models
from pedl.master.lifecycle.states import (
    _TABLES,
    AGENT_TRANSITIONS,
    ALLOCATION_TRANSITIONS,
    DELETING_EXPERIMENT,
    ENDED_EXPERIMENT,
    EXPERIMENT_TRANSITIONS,
    HELD,
    INSTANCE_TRANSITIONS,
    LIVE_ALLOCATION,
    LIVE_INSTANCE,
    STOPPING_TRIAL,
    TERMINAL_EXPERIMENT,
    TERMINAL_TRIAL,
    TRIAL_TRANSITIONS,
    AgentState,
    AllocationState,
    CheckpointState,
    ExperimentState,
    IllegalTransition,
    InstanceState,
    TrialState,
    can_transition,
    check_transition,
)
from pedl.master.lifecycle.transitions import set_checkpoint_state

# every table check_transition knows, so a lifecycle added later is covered here too
TABLES: dict[type[StrEnum], dict] = dict(_TABLES)


def test_known_tables_are_registered() -> None:
    assert TABLES[ExperimentState] is EXPERIMENT_TRANSITIONS
    assert TABLES[TrialState] is TRIAL_TRANSITIONS
    assert TABLES[AllocationState] is ALLOCATION_TRANSITIONS
    assert TABLES[AgentState] is AGENT_TRANSITIONS
    assert TABLES[InstanceState] is INSTANCE_TRANSITIONS


ALLOWED = [(old, new) for table in TABLES.values() for old, news in table.items() for new in sorted(news)]
FORBIDDEN = [
    (old, new)
    for enum, table in TABLES.items()
    for old, new in itertools.product(enum, enum)
    if old != new and new not in table[old]
]


@pytest.mark.parametrize("enum", list(TABLES))
def test_every_state_has_a_row(enum: type[StrEnum]) -> None:
    assert set(TABLES[enum]) == set(enum)
    for news in TABLES[enum].values():
        assert all(isinstance(n, enum) for n in news)


@pytest.mark.parametrize(("old", "new"), ALLOWED, ids=[f"{o.name}->{n.name}" for o, n in ALLOWED])
def test_allowed_transitions_pass(old: StrEnum, new: StrEnum) -> None:
    assert can_transition(old, new)
    check_transition("thing", 1, old, new)  # no exception


@pytest.mark.parametrize(
    ("old", "new"), FORBIDDEN, ids=[f"{type(o).__name__}:{o.name}->{n.name}" for o, n in FORBIDDEN]
)
def test_every_other_transition_is_refused(old: StrEnum, new: StrEnum) -> None:
    assert not can_transition(old, new)
    with pytest.raises(IllegalTransition):
        check_transition("thing", 7, old, new)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (ExperimentState.COMPLETED, ExperimentState.PAUSED),
        (ExperimentState.CANCELED, ExperimentState.STOPPING_CANCELED),
        (ExperimentState.DELETING, ExperimentState.ACTIVE),
        (ExperimentState.DELETE_FAILED, ExperimentState.COMPLETED),
        (ExperimentState.STOPPING_CANCELED, ExperimentState.ACTIVE),
        (ExperimentState.PAUSED, ExperimentState.COMPLETED),
        (TrialState.COMPLETED, TrialState.RUNNING),
        (TrialState.ERROR, TrialState.RUNNING),
        (TrialState.STOPPING_CANCELED, TrialState.RUNNING),
        (TrialState.PAUSED, TrialState.RUNNING),
        (AllocationState.TERMINATED, AllocationState.RUNNING),
        (AllocationState.PENDING, AllocationState.RUNNING),
        (AllocationState.RUNNING, AllocationState.PENDING),
        (AgentState.GONE, AgentState.DISCONNECTED),
        (InstanceState.TERMINATED, InstanceState.RUNNING),
        (InstanceState.RUNNING, InstanceState.STARTING),
        (InstanceState.TERMINATING, InstanceState.RUNNING),
    ],
)
def test_illegal_sample_is_an_internal_500_naming_both_states(old: StrEnum, new: StrEnum) -> None:
    # a refused edge is a master bug, not a user error: user actions are refused before with a Conflict
    with pytest.raises(IllegalTransition) as info:
        check_transition("trial", 42, old, new)
    err = info.value
    assert not isinstance(err, Conflict)
    assert err.code == ErrorCode.INTERNAL and HTTP_STATUS[err.code] == 500
    assert "trial 42" in err.message and str(old) in err.message and str(new) in err.message
    assert err.to_dict()["code"] == 13  # gRPC INTERNAL


@pytest.mark.parametrize(
    "state", [AllocationState.TERMINATED, InstanceState.TERMINATED], ids=lambda s: f"{type(s).__name__}:{s.name}"
)
def test_terminal_states_have_no_exits(state: StrEnum) -> None:
    assert TABLES[type(state)][state] == set()
    for other in type(state):
        if other != state:
            assert not can_transition(state, other)


def test_ended_experiments_and_trials_only_continue_or_are_deleted() -> None:
    for state in ENDED_EXPERIMENT:
        assert EXPERIMENT_TRANSITIONS[state] == {ExperimentState.ACTIVE, ExperimentState.DELETING}  # continue, delete
    assert EXPERIMENT_TRANSITIONS[ExperimentState.DELETING] == {ExperimentState.DELETE_FAILED}
    assert EXPERIMENT_TRANSITIONS[ExperimentState.DELETE_FAILED] == {ExperimentState.DELETING}  # a retry
    for state in TERMINAL_TRIAL:
        assert TRIAL_TRANSITIONS[state] == {TrialState.QUEUED}  # its experiment continued: a new run


def test_terminal_sets_are_exactly_the_states_that_only_continue_or_delete() -> None:
    assert TERMINAL_EXPERIMENT == ENDED_EXPERIMENT | DELETING_EXPERIMENT
    assert {
        s for s, n in EXPERIMENT_TRANSITIONS.items() if n <= {ExperimentState.ACTIVE} | DELETING_EXPERIMENT
    } == TERMINAL_EXPERIMENT
    assert {s for s, n in TRIAL_TRANSITIONS.items() if n == {TrialState.QUEUED}} == TERMINAL_TRIAL
    assert {s for s, n in ALLOCATION_TRANSITIONS.items() if not n} == {AllocationState.TERMINATED}
    assert set(AllocationState) - {AllocationState.TERMINATED} == LIVE_ALLOCATION


def test_every_non_terminal_state_can_reach_a_terminal_one() -> None:
    for enum, terminal in (
        (ExperimentState, TERMINAL_EXPERIMENT),
        (TrialState, TERMINAL_TRIAL),
        (AllocationState, {AllocationState.TERMINATED}),
        (InstanceState, {InstanceState.TERMINATED}),
    ):
        table = TABLES[enum]
        for start in enum:
            seen, todo = {start}, [start]
            while todo:
                for nxt in table[todo.pop()]:
                    if nxt not in seen:
                        seen.add(nxt)
                        todo.append(nxt)
            assert seen & terminal, f"{start} cannot reach a terminal state"


def test_stopping_trials_only_end() -> None:
    for state in STOPPING_TRIAL:
        assert TRIAL_TRANSITIONS[state] <= TERMINAL_TRIAL | STOPPING_TRIAL


def test_staying_in_the_same_state_is_allowed() -> None:
    for enum in TABLES:
        for state in enum:
            assert can_transition(state, state)


def test_names_are_determined_proto_names() -> None:
    for enum in (ExperimentState, TrialState):
        assert all(s.value == f"STATE_{s.name}" for s in enum)


def test_held_and_live_instance_sets() -> None:
    assert LIVE_ALLOCATION - {AllocationState.PENDING} == HELD
    assert set(InstanceState) - {InstanceState.TERMINATED} == LIVE_INSTANCE


def test_checkpoint_setter_checks_the_edge_and_records_one_event() -> None:
    class Recorder:  # the setter only adds rows to the session
        def __init__(self) -> None:
            self.added: list = []

        def add(self, row: object) -> None:
            self.added.append(row)

    s, ckpt = Recorder(), models.Checkpoint(uuid="ck-1", state=CheckpointState.COMPLETED.value)
    assert set_checkpoint_state(s, 5.0, ckpt, CheckpointState.DELETED, "deleted by garbage collection")
    assert ckpt.state == "STATE_DELETED"
    [ev] = s.added
    assert (ev.entity_type, ev.entity_id, ev.from_state, ev.to_state, ev.message) == (
        "checkpoint",
        "ck-1",
        "STATE_COMPLETED",
        "STATE_DELETED",
        "deleted by garbage collection",
    )
    with pytest.raises(IllegalTransition, match="checkpoint ck-1"):
        set_checkpoint_state(s, 6.0, ckpt, CheckpointState.COMPLETED)
    assert ckpt.state == "STATE_DELETED" and len(s.added) == 1
