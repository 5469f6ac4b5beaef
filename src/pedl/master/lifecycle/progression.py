"""Experiment progression: creating trials from searcher decisions, what an allocation's end means
for its trial (complete, restart from checkpoint, pause, cancel, error), and when the experiment is
done. The user actions kill / pause / activate are lifecycle/experiment_actions.py.

Functions here run inside one transaction under the cluster lock (Controller.run). They reach
allocations through lifecycle/allocations.py and everything beyond the transaction through the
effects protocol (lifecycle/effects.py), never the Controller itself."""

from __future__ import annotations

import random
import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from pedl.config.experiment_config import ExperimentConfig
from pedl.config.trial_api import UNLOADABLE_TRIAL_EXIT, is_legacy_entrypoint
from pedl.master.db import models
from pedl.master.db.base import existing
from pedl.master.lifecycle import allocations, checkpoint_gc_task_rows, search_progress, task_contact
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import (
    TERMINAL_EXPERIMENT,
    TERMINAL_TRIAL,
    AllocationState,
    ExperimentState,
    TrialState,
)
from pedl.master.lifecycle.transitions import record_event, set_experiment_state, set_trial_state
from pedl.master.lifecycle.trial_room import TRIALS_PER_PASS, RoomCalculator
from pedl.scheduling.searcher import SearcherActions, make_searcher

A, E, T = AllocationState, ExperimentState, TrialState
STOPPING = (T.STOPPING_CANCELED, T.STOPPING_COMPLETED)


def config_of(exp: models.Experiment) -> ExperimentConfig:
    return ExperimentConfig.model_validate(exp.config)


def _searcher(exp: models.Experiment, room: int):
    """The experiment's searcher, restored; `room` bounds the live trials it may have after this
    call (0 where the caller only reads it or must create nothing)."""
    return make_searcher(
        config_of(exp), seed=int(exp.searcher_state.get("seed", 0)), state=exp.searcher_state.get("state"), room=room
    )


def _room(fx: ClusterEffects, s: Session, exp: models.Experiment, rooms: RoomCalculator | None = None) -> int:
    """Live trials the experiment may have now: its pool's capacity in trials, a batch at a time."""
    rooms = rooms or RoomCalculator(s, fx.config)
    live = len((exp.searcher_state.get("state") or {}).get("live", []))
    return rooms.room(exp.resource_pool, int(exp.config["resources"]["slots_per_trial"]), live)


def _save_searcher(s: Session, exp: models.Experiment, searcher) -> None:
    exp.searcher_state = {**exp.searcher_state, "state": searcher.state()}
    search_progress.recompute(s, exp, searcher)


def start_searcher(fx: ClusterEffects, s: Session, exp: models.Experiment) -> None:
    cfg = config_of(exp)
    seed = cfg.reproducibility.experiment_seed
    if seed is None:
        seed = random.randrange(2**31)
    exp.searcher_state = {"seed": seed, "state": None}
    searcher = _searcher(exp, _room(fx, s, exp))
    actions = searcher.initial()
    _save_searcher(s, exp, searcher)
    apply_actions(fx, s, exp, actions)


def apply_actions(fx: ClusterEffects, s: Session, exp: models.Experiment, actions: SearcherActions) -> None:
    now = fx.now
    cfg = config_of(exp)
    length = cfg.searcher.trial_length
    for req in actions.create:
        # Determined's shape, `{experiment id}.{uuid}`, which det accepts as a task id; nothing reads
        # the trial back out of it (older masters' `{exp}.{trial}` ids stay valid as they are)
        trial = models.Trial(
            experiment_id=exp.id,
            request_id=req.request_id,
            task_id=f"{exp.id}.{uuid.uuid4()}",
            hparams=req.hparams,
            seed=req.seed,
            state=T.QUEUED,
            restarts=0,
            run_id=0,
            start_time=now,
            total_batches=0,
            summary_metrics={},
            target_length=length,
            warm_start_checkpoint=cfg.searcher.source_checkpoint_uuid,
        )
        s.add(trial)
        s.flush()
        record_event(
            s,
            now,
            "trial",
            trial.id,
            f"created by the {cfg.searcher.name} searcher with {req.hparams}",
            to_state=T.QUEUED,
        )
        if exp.state == E.ACTIVE:
            allocations.new(fx, s, exp, trial)
        else:
            set_trial_state(s, now, trial, T.PAUSED, "experiment is paused")
    reasons = _searcher(exp, 0).stop_reasons() if actions.stop else {}
    for request_id in actions.stop:
        trial = s.scalar(
            select(models.Trial).where(models.Trial.experiment_id == exp.id, models.Trial.request_id == request_id)
        )
        # a trial already being stopped (killed, or stopped before) goes on as it is: a kill is not
        # turned into a completion, and its last reports may still reach the searcher
        if trial is not None and trial.state not in TERMINAL_TRIAL and trial.state not in STOPPING:
            why = reasons.get(request_id)
            stop_trial(
                fx, s, exp, trial, f"stopped early by the searcher: {why}" if why else "stopped early by the searcher"
            )
    maybe_finish(fx, s, exp)


def trial_started(s: Session, now: float, alloc: models.Allocation) -> None:
    trial = s.get(models.Trial, alloc.trial_id) if alloc.trial_id else None
    if trial is not None and trial.state == T.QUEUED:
        set_trial_state(s, now, trial, T.RUNNING, f"allocation {alloc.id} started")


def _reached_target(trial: models.Trial) -> bool:
    return trial.target_length > 0 and trial.total_batches >= trial.target_length


def allocation_ended(
    fx: ClusterEffects, s: Session, alloc: models.Allocation, exit_code: int | None, reason: str
) -> None:
    """An allocation ended (its process exited, was lost, or never started): record it, then decide
    what that means for its trial and experiment."""
    why = allocations.terminate(fx, s, alloc, exit_code, reason)
    if alloc.trial_id is None:  # a generic task: a checkpoint GC task's end means something to its experiment
        checkpoint_gc_task_rows.ended(fx, s, alloc)
        return
    _trial_outcome(fx, s, alloc, exit_code, why, counts_as_failure=reason != allocations.NOT_STARTED)


def _trial_outcome(
    fx: ClusterEffects, s: Session, alloc: models.Allocation, exit_code: int | None, why: str, counts_as_failure: bool
) -> None:
    now = fx.now
    trial = s.get(models.Trial, alloc.trial_id) if alloc.trial_id else None
    if trial is None or trial.state in TERMINAL_TRIAL:
        return
    exp = existing(s, models.Experiment, trial.experiment_id)
    cfg = config_of(exp)
    state = trial.state
    canceling = exp.state in (E.STOPPING_CANCELED, E.CANCELED)

    if state == T.STOPPING_CANCELED or canceling:
        set_trial_state(s, now, trial, T.STOPPING_CANCELED, "killed")
        set_trial_state(s, now, trial, T.CANCELED, f"killed; allocation {why}")
        trial.end_time = now
        trial.end_reason = trial.end_reason or ("experiment killed" if canceling else "killed")
        if not canceling:  # one trial killed: the searcher closes it and may go on
            close_early(fx, s, exp, trial, "killed")
    elif exit_code == 0 and _ran_off_cluster(alloc, trial):
        # Determined completes it; its log says why nothing of it shows (dummy mode, or no Core API at all)
        logs.add_master_line(s, now, alloc, task_contact.NEVER_REPORTED, level="LOG_LEVEL_WARNING")
        record_event(s, now, "trial", trial.id, task_contact.NEVER_REPORTED, level="warning")
        _complete(fx, s, exp, trial, "completed without ever calling the master")
    elif state == T.STOPPING_COMPLETED or (exit_code == 0 and (not alloc.preempt_requested or _reached_target(trial))):
        _complete(fx, s, exp, trial, "stopped early by the searcher" if state == T.STOPPING_COMPLETED else "completed")
    elif alloc.preempt_requested and exit_code == 0:
        # it checkpointed and left as asked
        if exp.state == E.PAUSED:
            set_trial_state(s, now, trial, T.PAUSED, "paused with its experiment")
        else:
            set_trial_state(s, now, trial, T.QUEUED, "preempted; queued again")
            allocations.new(fx, s, exp, trial)
    elif alloc.kill_requested and exp.state == E.PAUSED:
        # the master stopped it with its experiment paused (its owner's credentials ended: user_revocation.py):
        # not a failure; it goes on from its latest checkpoint once the experiment is activated
        set_trial_state(s, now, trial, T.PAUSED, f"paused with its experiment; allocation {why}")
    elif not counts_as_failure:
        _requeue(fx, s, exp, trial, f"queued again: {why}")
    elif exit_code == UNLOADABLE_TRIAL_EXIT and is_legacy_entrypoint(cfg.entrypoint):
        # its Trial class cannot be loaded in its environment (the log says why): each restart would fail alike
        trial.end_reason = end_reason = (
            f"its Trial class {cfg.entrypoint} could not be loaded (the trial's log says why): {why}"
        )
        set_trial_state(s, now, trial, T.ERROR, end_reason, level="error")
        trial.end_time = now
        close_early(fx, s, exp, trial, why)
    elif trial.restarts < cfg.max_restarts:
        trial.restarts += 1
        record_event(
            s,
            now,
            "trial",
            trial.id,
            f"failed ({why}); restart {trial.restarts} of {cfg.max_restarts}"
            + (f" from checkpoint {trial.latest_checkpoint}" if trial.latest_checkpoint else ""),
            level="warning",
        )
        _requeue(fx, s, exp, trial, f"restarting after failure: {why}")
    else:
        trial.end_reason = end_reason = f"failed after {trial.restarts} restart(s): {why}"
        set_trial_state(s, now, trial, T.ERROR, end_reason, level="error")
        trial.end_time = now
        close_early(fx, s, exp, trial, why)
    maybe_finish(fx, s, exp)


def _ran_off_cluster(alloc: models.Allocation, trial: models.Trial) -> bool:
    """Exited 0 having never called the master, and nothing of the trial was ever reported: a
    restart of a trial that had reported keeps the benefit of the doubt."""
    return (
        alloc.contacted_at is None
        and not alloc.preempt_requested
        and not alloc.kill_requested
        and trial.total_batches == 0
        and trial.latest_checkpoint is None
    )


def fail_unschedulable(fx: ClusterEffects, s: Session, alloc: models.Allocation, reason: str) -> None:
    """A task no allowed instance type can ever hold fails at once instead of waiting forever."""
    now = fx.now
    allocations.fail_unschedulable(fx, s, alloc, reason)
    trial = s.get(models.Trial, alloc.trial_id) if alloc.trial_id else None
    if trial is None or trial.state in TERMINAL_TRIAL:
        return
    exp = existing(s, models.Experiment, trial.experiment_id)
    trial.end_reason = end_reason = f"can never be scheduled: {reason}"
    set_trial_state(s, now, trial, T.ERROR, end_reason, level="error")
    trial.end_time = now
    record_event(s, now, "experiment", exp.id, f"trial {trial.id} {end_reason}", level="error")
    close_early(fx, s, exp, trial, end_reason)
    maybe_finish(fx, s, exp)


def close_early(fx: ClusterEffects, s: Session, exp: models.Experiment, trial: models.Trial, reason: str) -> None:
    """Tell the searcher a trial ended without finishing (error or kill) and apply what it decides."""
    trial.end_reason = trial.end_reason or reason
    fx.want_checkpoint_gc(exp.id)
    searcher = _searcher(exp, _room(fx, s, exp))
    actions = searcher.on_trial_exited_early(trial.request_id, reason)
    _save_searcher(s, exp, searcher)
    apply_actions(fx, s, exp, actions)


def _requeue(fx: ClusterEffects, s: Session, exp: models.Experiment, trial: models.Trial, reason: str) -> None:
    if exp.state == E.ACTIVE:
        set_trial_state(s, fx.now, trial, T.QUEUED, reason)
        allocations.new(fx, s, exp, trial)
    else:
        set_trial_state(s, fx.now, trial, T.PAUSED, reason + " (experiment paused)")


def _complete(fx: ClusterEffects, s: Session, exp: models.Experiment, trial: models.Trial, reason: str) -> None:
    set_trial_state(s, fx.now, trial, T.COMPLETED, reason)
    trial.end_time = fx.now
    trial.end_reason = trial.end_reason or reason  # the searcher's stop keeps its own, more telling reason
    fx.want_checkpoint_gc(exp.id)
    searcher = _searcher(exp, _room(fx, s, exp))
    actions = searcher.on_trial_closed(trial.request_id)
    _save_searcher(s, exp, searcher)
    apply_actions(fx, s, exp, actions)


def stop_trial(fx: ClusterEffects, s: Session, exp: models.Experiment, trial: models.Trial, reason: str) -> None:
    """The searcher is done with a trial: stop it gracefully (preempt) and close it as completed."""
    trial.end_reason = reason  # the API's endReason: why the searcher stopped it
    alloc = allocations.live_allocation(s, trial)
    if alloc is None or alloc.state == A.PENDING:
        if alloc is not None:
            allocations.kill(fx, s, alloc, reason)
        _complete(fx, s, exp, trial, reason)
        return
    set_trial_state(s, fx.now, trial, T.STOPPING_COMPLETED, reason)
    allocations.preempt(fx, s, alloc, reason)


def on_validation(
    fx: ClusterEffects,
    s: Session,
    trial: models.Trial,
    value: float,
    steps: int,
    metrics: Mapping[str, Any] | None = None,
) -> None:
    """`metrics`: the whole validation report (a searcher with a time_metric reads its time there)."""
    exp = s.get(models.Experiment, trial.experiment_id)
    if exp is None or exp.state in TERMINAL_EXPERIMENT:
        return
    searcher = _searcher(exp, 0)  # a validation decides stops; trials are created on closes and top-ups
    actions = searcher.on_validation(trial.request_id, value, steps, metrics)
    _save_searcher(s, exp, searcher)
    apply_actions(fx, s, exp, actions)


TOP_UP_EXPERIMENTS_PER_PASS = 20


def top_up_candidates(s: Session) -> list[tuple[int, str, int | None, int | None]]:
    """(id, pool, slots_per_trial, max_concurrent_trials) of ACTIVE experiments whose searcher may
    create more trials; read from JSON in SQL, so no config or searcher state is loaded."""
    X = models.Experiment
    exhausted = X.searcher_state[("state", "exhausted")].as_boolean()
    return [
        (exp_id, pool, slots, most)
        for exp_id, pool, slots, most in s.execute(
            select(
                X.id,
                X.resource_pool,
                X.config[("resources", "slots_per_trial")].as_integer(),
                X.config[("searcher", "max_concurrent_trials")].as_integer(),
            )
            .where(X.state == E.ACTIVE, or_(exhausted.is_(None), exhausted.is_(False)))
            .order_by(X.id)
        )
    ]


def top_up(fx: ClusterEffects, s: Session, saturated: dict[int, tuple[int, int]]) -> None:
    """Create the trials that room allows now that was not there before (an agent registered, an
    instance came up, a batch was cut short): ACTIVE experiments whose searcher is not exhausted.
    Bounded: one light query, at most TOP_UP_EXPERIMENTS_PER_PASS searchers, TRIALS_PER_PASS trials.

    `saturated` ({experiment id: (live trials, capacity)}, kept by the caller between passes) holds
    the experiments where a top-up created nothing (adaptive_asha at its brackets' concurrency);
    they are skipped until one of the two numbers changes."""
    rows = top_up_candidates(s)
    for gone in saturated.keys() - {r[0] for r in rows}:
        del saturated[gone]
    if not rows:
        return
    live = dict(
        s.execute(
            select(models.Trial.experiment_id, func.count())
            .where(
                models.Trial.experiment_id.in_([r[0] for r in rows]), models.Trial.state.not_in(sorted(TERMINAL_TRIAL))
            )
            .group_by(models.Trial.experiment_id)
        ).all()
    )
    rooms = RoomCalculator(s, fx.config)
    wanting = []
    for exp_id, pool, slots_per_trial, max_concurrent in rows:
        n = live.get(exp_id, 0)
        capacity = rooms.capacity(pool, slots_per_trial or 0)
        if max_concurrent:
            capacity = min(capacity, max_concurrent)
        if n < capacity and saturated.get(exp_id) != (n, capacity):
            wanting.append((n, exp_id, capacity))
    budget = TRIALS_PER_PASS
    for n, exp_id, capacity in sorted(wanting)[:TOP_UP_EXPERIMENTS_PER_PASS]:  # the fewest live trials first
        exp = existing(s, models.Experiment, exp_id)
        searcher_live = len((exp.searcher_state.get("state") or {}).get("live", []))
        searcher = _searcher(exp, min(_room(fx, s, exp, rooms), searcher_live + budget))
        actions = searcher.top_up()
        _save_searcher(s, exp, searcher)
        apply_actions(fx, s, exp, actions)
        budget -= len(actions.create)
        if actions.create:
            saturated.pop(exp_id, None)
        else:
            saturated[exp_id] = (n, capacity)
        if budget <= 0:
            break


def maybe_finish(fx: ClusterEffects, s: Session, exp: models.Experiment) -> None:
    now = fx.now
    if exp.state in TERMINAL_EXPERIMENT:
        return
    trials = list(s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id)))
    live = [t for t in trials if t.state not in TERMINAL_TRIAL]
    if exp.state == E.STOPPING_CANCELED:
        if not any(allocations.live_allocation(s, t) for t in live):
            for t in live:
                set_trial_state(s, now, t, T.CANCELED, "experiment killed")
                t.end_time = now
                t.end_reason = t.end_reason or "experiment killed"
            exp.end_reason = end_reason = exp.end_reason or "killed"
            set_experiment_state(s, now, exp, E.CANCELED, end_reason)
            exp.end_time = now
            search_progress.recompute(s, exp, _searcher(exp, 0))  # it keeps the progress it reached
            fx.want_checkpoint_gc(exp.id)
        return
    state = exp.searcher_state.get("state") or {}
    searcher_done = state.get("exhausted") and not state.get("live")
    if exp.state in (E.ACTIVE, E.STOPPING_COMPLETED) and searcher_done and not live:
        errored = [t for t in trials if t.state == T.ERROR]
        if trials and len(errored) == len(trials):
            exp.end_reason = end_reason = (
                f"all {len(trials)} trial(s) failed; trial {errored[-1].id}: {errored[-1].end_reason}"
            )
            set_experiment_state(s, now, exp, E.ERROR, end_reason)
            search_progress.recompute(s, exp, _searcher(exp, 0))  # it keeps the progress it reached
        else:
            if errored:
                end_reason = f"{len(errored)} of {len(trials)} trial(s) failed: " + ", ".join(
                    f"trial {t.id}: {t.end_reason}" for t in errored
                )
            else:
                canceled = sum(1 for t in trials if t.state == T.CANCELED)
                end_reason = f"the searcher finished: {len(trials) - canceled} trial(s) completed" + (
                    f", {canceled} killed" if canceled else ""
                )
            exp.end_reason = end_reason
            set_experiment_state(s, now, exp, E.COMPLETED, end_reason)
            exp.progress = 1.0
        exp.end_time = now
        fx.want_checkpoint_gc(exp.id)
