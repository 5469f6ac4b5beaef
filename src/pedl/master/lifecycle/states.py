"""Lifecycle state machines: one enum per lifecycle, an explicit table of allowed transitions, and
one `check_transition` that refuses illegal edges. Names are Determined's proto enum names."""

from __future__ import annotations

from enum import StrEnum

from pedl.errors import ErrorCode, PedlError


class ExperimentState(StrEnum):
    ACTIVE = "STATE_ACTIVE"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"
    DELETING = "STATE_DELETING"  # its files, then its rows, are being deleted (experiments/deletion.py)
    DELETE_FAILED = "STATE_DELETE_FAILED"  # deleting again retries


class TrialState(StrEnum):
    QUEUED = "STATE_QUEUED"  # waiting for slots
    RUNNING = "STATE_RUNNING"
    PAUSED = "STATE_PAUSED"
    STOPPING_COMPLETED = "STATE_STOPPING_COMPLETED"  # searcher is done with it; process exiting
    STOPPING_CANCELED = "STATE_STOPPING_CANCELED"  # killed; process exiting
    STOPPING_ERROR = "STATE_STOPPING_ERROR"
    COMPLETED = "STATE_COMPLETED"
    CANCELED = "STATE_CANCELED"
    ERROR = "STATE_ERROR"


class AllocationState(StrEnum):
    PENDING = "STATE_PENDING"  # asked for slots, not yet assigned
    ASSIGNED = "STATE_ASSIGNED"  # slots chosen, start sent to the agent(s)
    RUNNING = "STATE_RUNNING"  # the process runs
    TERMINATING = "STATE_TERMINATING"  # kill sent
    TERMINATED = "STATE_TERMINATED"


class AgentState(StrEnum):
    CONNECTED = "CONNECTED"
    DISCONNECTED = "DISCONNECTED"  # heartbeats stopped; tasks kept for agent_reconnect_wait
    GONE = "GONE"  # past the reconnect wait; its allocations were failed


class InstanceState(StrEnum):
    REQUESTED = "REQUESTED"  # an open spot request
    STARTING = "STARTING"  # launched; its agent has not registered yet
    RUNNING = "RUNNING"  # its agent registered
    TERMINATING = "TERMINATING"  # terminate sent
    TERMINATED = "TERMINATED"


class CheckpointState(StrEnum):
    """Determined's checkpointv1State names; tasks report checkpoints COMPLETED, and checkpoint
    garbage collection deletes them."""

    ACTIVE = "STATE_ACTIVE"
    COMPLETED = "STATE_COMPLETED"
    ERROR = "STATE_ERROR"
    DELETED = "STATE_DELETED"
    PARTIALLY_DELETED = "STATE_PARTIALLY_DELETED"


E, T, A, G, N = ExperimentState, TrialState, AllocationState, AgentState, InstanceState

EXPERIMENT_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    E.ACTIVE: {E.PAUSED, E.STOPPING_COMPLETED, E.STOPPING_CANCELED, E.STOPPING_ERROR, E.COMPLETED, E.CANCELED, E.ERROR},
    E.PAUSED: {E.ACTIVE, E.STOPPING_CANCELED, E.CANCELED},
    E.STOPPING_COMPLETED: {E.COMPLETED, E.STOPPING_CANCELED, E.ERROR},
    E.STOPPING_CANCELED: {E.CANCELED},
    E.STOPPING_ERROR: {E.ERROR, E.STOPPING_CANCELED},
    # an ended experiment runs again only when continued (det e continue), or is deleted
    E.COMPLETED: {E.ACTIVE, E.DELETING},
    E.CANCELED: {E.ACTIVE, E.DELETING},
    E.ERROR: {E.ACTIVE, E.DELETING},
    E.DELETING: {E.DELETE_FAILED},  # a finished deletion leaves no row behind
    E.DELETE_FAILED: {E.DELETING},
}

TRIAL_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    T.QUEUED: {T.RUNNING, T.PAUSED, T.CANCELED, T.ERROR, T.COMPLETED, T.STOPPING_CANCELED},
    T.RUNNING: {
        T.QUEUED,
        T.PAUSED,
        T.STOPPING_COMPLETED,
        T.STOPPING_CANCELED,
        T.STOPPING_ERROR,
        T.COMPLETED,
        T.ERROR,
        T.CANCELED,
    },
    T.PAUSED: {T.QUEUED, T.CANCELED, T.COMPLETED},
    T.STOPPING_COMPLETED: {T.COMPLETED, T.ERROR, T.STOPPING_CANCELED, T.CANCELED},
    T.STOPPING_CANCELED: {T.CANCELED},
    T.STOPPING_ERROR: {T.ERROR},
    # an ended trial gets a new run only when its experiment is continued
    T.COMPLETED: {T.QUEUED},
    T.CANCELED: {T.QUEUED},
    T.ERROR: {T.QUEUED},
}

ALLOCATION_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    A.PENDING: {A.ASSIGNED, A.TERMINATED},
    A.ASSIGNED: {A.RUNNING, A.TERMINATING, A.TERMINATED},
    A.RUNNING: {A.TERMINATING, A.TERMINATED},
    A.TERMINATING: {A.TERMINATED},
    A.TERMINATED: set(),
}

AGENT_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    G.CONNECTED: {G.DISCONNECTED, G.GONE},
    G.DISCONNECTED: {G.CONNECTED, G.GONE},
    G.GONE: {G.CONNECTED},
}

INSTANCE_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    N.REQUESTED: {N.STARTING, N.TERMINATING, N.TERMINATED},
    N.STARTING: {N.RUNNING, N.TERMINATING, N.TERMINATED},
    N.RUNNING: {N.TERMINATING, N.TERMINATED},
    N.TERMINATING: {N.TERMINATED},
    N.TERMINATED: set(),
}

C = CheckpointState
CHECKPOINT_TRANSITIONS: dict[StrEnum, set[StrEnum]] = {
    C.ACTIVE: {C.COMPLETED, C.ERROR, C.DELETED, C.PARTIALLY_DELETED},
    # garbage collection or a user's delete; a failed deletion stays COMPLETED and is retried
    C.COMPLETED: {C.DELETED, C.PARTIALLY_DELETED},  # files removed by a user (det checkpoint rm)
    C.PARTIALLY_DELETED: {C.DELETED},  # `det trial describe` cannot show it: its workloads say COMPLETED
    C.ERROR: {C.DELETED, C.PARTIALLY_DELETED},
    C.DELETED: set(),
}

ENDED_EXPERIMENT = {E.COMPLETED, E.CANCELED, E.ERROR}  # what may be continued or deleted
DELETING_EXPERIMENT = {E.DELETING, E.DELETE_FAILED}
TERMINAL_EXPERIMENT = ENDED_EXPERIMENT | DELETING_EXPERIMENT  # nothing of it runs, and nothing starts by itself
TERMINAL_TRIAL = {T.COMPLETED, T.CANCELED, T.ERROR}
STOPPING_TRIAL = {T.STOPPING_COMPLETED, T.STOPPING_CANCELED, T.STOPPING_ERROR}
LIVE_ALLOCATION = {A.PENDING, A.ASSIGNED, A.RUNNING, A.TERMINATING}
HELD = {A.ASSIGNED, A.RUNNING, A.TERMINATING}  # allocations that hold slots on agents
LIVE_INSTANCE = {N.REQUESTED, N.STARTING, N.RUNNING, N.TERMINATING}

# An ACTIVE experiment is reported as Determined 0.38.1 reports it, by how far the furthest of its
# trials' live allocations got: QUEUED, STARTING (pedl's agents pull an image while starting, so
# PULLING is never reported), RUNNING. Derived on read from the allocations, never stored: the
# table above stays the lifecycle, and "active" filters match all four (they are its substates).
ACTIVE_SUBSTATES = ("STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING")
_ACTIVE_AS = {
    A.PENDING: "STATE_QUEUED",
    A.ASSIGNED: "STATE_STARTING",
    A.RUNNING: "STATE_RUNNING",
    A.TERMINATING: "STATE_RUNNING",
}  # a trial being stopped still runs
RUN_PROGRESS = {A.PENDING: 1, A.ASSIGNED: 2, A.RUNNING: 3, A.TERMINATING: 3}  # how far, to take the furthest
_BY_PROGRESS = {1: A.PENDING, 2: A.ASSIGNED, 3: A.RUNNING}


def reported_experiment_state(stored: ExperimentState, furthest: int | None) -> str:
    """What the API shows for an experiment `stored` in this state whose trials' live allocations got
    as far as `furthest` (a RUN_PROGRESS value; None: it has none, e.g. between two trials)."""
    if stored != E.ACTIVE or not furthest:
        return stored
    return _ACTIVE_AS[_BY_PROGRESS[furthest]]


_TABLES = {
    ExperimentState: EXPERIMENT_TRANSITIONS,
    TrialState: TRIAL_TRANSITIONS,
    AllocationState: ALLOCATION_TRANSITIONS,
    AgentState: AGENT_TRANSITIONS,
    InstanceState: INSTANCE_TRANSITIONS,
    CheckpointState: CHECKPOINT_TRANSITIONS,
}


class IllegalTransition(PedlError):
    """A refused edge is a bug in the master, not a user error: user actions that do not apply in a
    state are refused (Conflict) before any transition is tried. The API answers 500 and logs it."""

    code = ErrorCode.INTERNAL


def can_transition(old: StrEnum, new: StrEnum) -> bool:
    if old == new:
        return True
    return new in _TABLES[type(old)][old]


def check_transition(kind: str, ident: object, old: StrEnum, new: StrEnum) -> None:
    if not can_transition(old, new):
        raise IllegalTransition(f"{kind} {ident}: cannot go from {old} to {new}")
