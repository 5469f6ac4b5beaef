"""The user actions on an experiment: kill, pause and activate, each setting the experiment's state
and stopping, preempting or queueing its trials' allocations to match.

Like progression.py, they run inside one transaction under the cluster lock; what the trials'
ends then mean for the experiment is progression's (`maybe_finish`, `allocation_ended`)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle import allocations, progression
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import (
    TERMINAL_EXPERIMENT,
    TERMINAL_TRIAL,
    AllocationState,
    ExperimentState,
    TrialState,
)
from pedl.master.lifecycle.transitions import set_experiment_state, set_trial_state

A, E, T = AllocationState, ExperimentState, TrialState


def kill(fx: ClusterEffects, s: Session, exp: models.Experiment) -> None:
    if exp.state in TERMINAL_EXPERIMENT or exp.state == E.STOPPING_CANCELED:
        return
    set_experiment_state(s, fx.now, exp, E.STOPPING_CANCELED, "kill requested")
    for trial in s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id)):
        if trial.state in TERMINAL_TRIAL:
            continue
        alloc = allocations.live_allocation(s, trial)
        if alloc is not None and alloc.state != A.PENDING:
            set_trial_state(s, fx.now, trial, T.STOPPING_CANCELED, "experiment killed")
            allocations.kill(fx, s, alloc, "experiment killed")
        else:
            if alloc is not None:
                allocations.kill(fx, s, alloc, "experiment killed")
            set_trial_state(s, fx.now, trial, T.CANCELED, "experiment killed")
            trial.end_time = fx.now
            trial.end_reason = trial.end_reason or "experiment killed"
    progression.maybe_finish(fx, s, exp)


def pause(fx: ClusterEffects, s: Session, exp: models.Experiment) -> None:
    if exp.state == E.PAUSED:
        return
    set_experiment_state(s, fx.now, exp, E.PAUSED, "pause requested")
    for trial in s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id)):
        if trial.state in TERMINAL_TRIAL:
            continue
        alloc = allocations.live_allocation(s, trial)
        if alloc is None or alloc.state == A.PENDING:
            if alloc is not None:
                allocations.kill(fx, s, alloc, "experiment paused")
            if trial.state == T.QUEUED:
                set_trial_state(s, fx.now, trial, T.PAUSED, "experiment paused")
        else:
            allocations.preempt(fx, s, alloc, "experiment paused")


def activate(fx: ClusterEffects, s: Session, exp: models.Experiment) -> None:
    if exp.state == E.ACTIVE:
        return
    set_experiment_state(s, fx.now, exp, E.ACTIVE, "activated")
    for trial in s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id)):
        if trial.state == T.PAUSED:
            set_trial_state(s, fx.now, trial, T.QUEUED, "experiment activated")
            allocations.new(fx, s, exp, trial)
    progression.maybe_finish(fx, s, exp)
