"""The one place lifecycle states change: each setter checks the transition table and records an
event with time and reason, which doubles as the user-facing event log."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle.states import (
    AgentState,
    AllocationState,
    CheckpointState,
    ExperimentState,
    InstanceState,
    TrialState,
    check_transition,
)


def record_event(
    s: Session,
    now: float,
    entity_type: str,
    entity_id: object,
    message: str,
    *,
    from_state: str | None = None,
    to_state: str | None = None,
    level: str = "info",
) -> None:
    s.add(
        models.Event(
            entity_type=entity_type,
            entity_id=str(entity_id),
            time=now,
            from_state=from_state,
            to_state=to_state,
            level=level,
            message=message,
        )
    )


def _set(
    s: Session,
    now: float,
    kind: str,
    row,
    enum: type[StrEnum],
    new: StrEnum,
    reason: str,
    level: str = "info",
    ident: object = None,
) -> bool:
    ident = row.id if ident is None else ident
    old = enum(row.state)
    if old == new:
        return False
    check_transition(kind, ident, old, new)
    row.state = new
    record_event(s, now, kind, ident, reason, from_state=str(old), to_state=str(new), level=level)
    return True


def set_experiment_state(
    s: Session, now: float, exp: models.Experiment, new: ExperimentState, reason: str = ""
) -> bool:
    return _set(s, now, "experiment", exp, ExperimentState, new, reason)


def set_trial_state(
    s: Session, now: float, trial: models.Trial, new: TrialState, reason: str = "", level: str = "info"
) -> bool:
    return _set(s, now, "trial", trial, TrialState, new, reason, level)


def set_allocation_state(
    s: Session, now: float, alloc: models.Allocation, new: AllocationState, reason: str = ""
) -> bool:
    return _set(s, now, "allocation", alloc, AllocationState, new, reason)


def set_agent_state(
    s: Session, now: float, agent: models.Agent, new: AgentState, reason: str = "", level: str = "info"
) -> bool:
    return _set(s, now, "agent", agent, AgentState, new, reason, level)


def set_instance_state(
    s: Session, now: float, inst: models.Instance, new: InstanceState, reason: str = "", level: str = "info"
) -> bool:
    return _set(s, now, "instance", inst, InstanceState, new, reason, level)


def set_checkpoint_state(
    s: Session, now: float, ckpt: models.Checkpoint, new: CheckpointState, reason: str = ""
) -> bool:
    return _set(s, now, "checkpoint", ckpt, CheckpointState, new, reason, ident=ckpt.uuid)
