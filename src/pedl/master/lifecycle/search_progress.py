"""An experiment's progress: the length its trials completed against its searcher's total, set in
full whenever the searcher moves (`recompute`) and nudged by each trial report in between
(`measure`, then `apply`).

A trial's length completed is the share of its target it reached, 0..1: batches trained against
its target (when searcher.max_length is in batches) or the progress it reported, whichever is
further, never past 1. A COMPLETED trial counts as 1 unless the searcher stopped it early (then
what it trained is all it will train; see AdaptiveASHASearcher.total_length). Every trial of an
experiment has the same target, so shares add up as lengths in units of max_length."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import case, select, update
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import TERMINAL_TRIAL, TrialState
from pedl.scheduling.searcher import Searcher

# kept in experiments.searcher_state beside the searcher's own state, for the per-report nudge
TOTAL_KEY = "progress_total"  # the searcher's total_length at its last move
BY_BATCHES_KEY = "progress_by_batches"  # whether max_length is in batches
VERSION_KEY = "progress_version"  # counts recomputes: a report's nudge applies to the one it read


def share(total_batches: int, target_length: int, reported: Any, by_batches: bool) -> float:
    """The share of its target a trial completed, 0..1."""
    done = float(reported) if isinstance(reported, int | float) and not isinstance(reported, bool) else 0.0
    if not math.isfinite(done):
        done = 0.0
    if by_batches and target_length > 0:
        done = max(done, total_batches / target_length)
    return min(1.0, max(0.0, done))


def lengths_in_batches(config: dict[str, Any]) -> bool:
    searcher = config.get("searcher") or {}
    length = searcher.get("max_length")
    if length is None:  # Determined 0.38's time_metric: in batches when that is the metric
        return searcher.get("time_metric") == "batches" and bool(searcher.get("max_time"))
    return isinstance(length, dict) and length.get("batches") is not None


def recompute(s: Session, exp: models.Experiment, searcher: Searcher) -> None:
    """Set the experiment's progress from its trials' rows (their columns only, never metrics) and
    keep the searcher's total for `measure`. Called where the searcher's state is saved."""
    by_batches = lengths_in_batches(exp.config)
    stopped = searcher.stop_reasons()
    T = models.Trial
    rows = s.execute(
        select(T.request_id, T.state, T.total_batches, T.target_length, T.summary_metrics["progress"].as_float()).where(
            T.experiment_id == exp.id
        )
    )
    done = {
        rid: 1.0
        if state == TrialState.COMPLETED and rid not in stopped
        else share(batches or 0, target or 0, reported, by_batches)
        for rid, state, batches, target, reported in rows
    }
    exp.progress = searcher.progress(done)
    exp.searcher_state = {
        **exp.searcher_state,
        TOTAL_KEY: searcher.total_length(done),
        BY_BATCHES_KEY: by_batches,
        VERSION_KEY: int(exp.searcher_state.get(VERSION_KEY) or 0) + 1,
    }


def before_report(trial: models.Trial) -> tuple[int, Any]:
    """What `measure` compares against: take it before the report changes the trial."""
    return trial.total_batches, (trial.summary_metrics or {}).get("progress")


@dataclass(frozen=True)
class Nudge:
    """What one report adds to its experiment's progress, valid while the progress is the one
    `recompute` set as `version` (a recompute that came after counted the report already)."""

    experiment_id: int
    version: int
    amount: float


def measure(s: Session, trial: models.Trial, before: tuple[int, Any]) -> Nudge | None:
    """In the report's transaction, after it changed the trial: what it moved the experiment on by.
    Reads the experiment's row by key and locks nothing of it. A trial the searcher is stopping,
    or one that ended, is left to the searcher's next move (its share may count as done)."""
    if trial.state in TERMINAL_TRIAL or trial.state == TrialState.STOPPING_COMPLETED:
        return None
    X = models.Experiment
    total, by_batches, version = s.execute(
        select(
            X.searcher_state[TOTAL_KEY].as_float(),
            X.searcher_state[BY_BATCHES_KEY].as_boolean(),
            X.searcher_state[VERSION_KEY].as_integer(),
        ).where(X.id == trial.experiment_id)
    ).one()
    if not total or total <= 0 or version is None:
        return None
    old = share(before[0], trial.target_length, before[1], bool(by_batches))
    new = share(
        trial.total_batches, trial.target_length, (trial.summary_metrics or {}).get("progress"), bool(by_batches)
    )
    return Nudge(trial.experiment_id, version, (new - old) / total) if new > old else None


def apply(db: Database, nudge: Nudge | None) -> None:
    """Add a report's nudge in a transaction of its own, once the report's is committed: it holds
    the experiment's row alone, so it never waits on a trial's row while holding the experiment's
    (the controller takes both, in either order). Lost, not counted twice, when a recompute came
    in between; the next recompute has it."""
    if nudge is None:
        return
    X = models.Experiment
    moved = X.progress + nudge.amount
    with db.session() as s:
        s.execute(
            update(X)
            .where(X.id == nudge.experiment_id, X.searcher_state[VERSION_KEY].as_integer() == nudge.version)
            .values(progress=case((moved > 1.0, 1.0), else_=moved))
            .execution_options(synchronize_session=False)
        )
