"""What a running trial reports about itself (metrics, progress, searcher completion, early exit),
accepted only with the task token of the trial's live allocation (metrics also from a user who may
edit the experiment, as in Determined). Each report that moves the trial
on moves its experiment's progress too, in a transaction of its own (search_progress)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from sqlalchemy.orm import Session

from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.db.base import existing
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle import progression as experiment_progression
from pedl.master.lifecycle import search_progress
from pedl.master.lifecycle.states import TERMINAL_TRIAL
from pedl.master.lifecycle.task_access import require_task
from pedl.master.metrics import service as metrics
from pedl.master.metrics import summaries as metric_summaries
from pedl.master.trials import service as trials_service

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def trial_for_report(s: Session, who: Caller, trial_id: int) -> models.Trial:
    """The trial, for a report made with the task token of its live allocation (404 before 403)."""
    trial = trials_service.get(s, trial_id)  # 404 before 403: the trial id is not a secret
    require_task(s, who, trial_id=trial_id)
    return trial


def report_metrics(
    ctx: MasterContext,
    who: Caller,
    trial_id: int,
    *,
    group: str,
    steps_completed: int,
    trial_run_id: int,
    values: dict[str, Any],
) -> None:
    """From the task token of the trial's live allocation, or, as Determined allows (its SDK on a
    paused experiment, trialRunId 0), from a user who may edit the trial's experiment."""

    def store(s: Session) -> search_progress.Nudge | None:
        if who.allocation_id is None:
            trial = trials_service.get(s, trial_id)
            exp = existing(s, models.Experiment, trial.experiment_id)
            require_owner(who, exp.owner_id, f"report metrics of trial {trial_id}")
        else:
            trial = trial_for_report(s, who, trial_id)
        metric_summaries.check_names(
            trial.id,
            trial.summary_metrics,
            [(group, values)],
            ctx.config.limits.max_metric_names_per_trial,
            lambda _: "metrics.metrics.avgMetrics",
        )
        before = search_progress.before_report(trial)
        metrics.record(
            s,
            trial,
            group=group,
            steps_completed=steps_completed,
            trial_run_id=trial_run_id,
            report_time=ctx.clock.now(),
            metrics=values,
        )
        if group != "validation":
            return search_progress.measure(s, trial, before)
        exp = existing(s, models.Experiment, trial.experiment_id)
        sc = exp.config.get("searcher", {})
        value = metrics.update_best(trial, sc.get("metric", ""), sc.get("smaller_is_better", True), values)
        if value is not None and trial.state not in TERMINAL_TRIAL:
            experiment_progression.on_validation(ctx.controller, s, trial, value, steps_completed, values)
            return None  # the searcher moved: the progress was recomputed with this report in it
        return search_progress.measure(s, trial, before)

    nudge: search_progress.Nudge | None
    if group == "validation":
        # the searcher may act on it, so it runs under the cluster lock
        nudge = cast("search_progress.Nudge | None", ctx.controller.run(store))
    else:
        with ctx.db.session() as s:
            nudge = store(s)
    ctx.metrics.metric_report(group)  # counted once stored; a refused report is not ingested
    ctx.digest_queue.touch(trial_id, group)
    search_progress.apply(ctx.db, nudge)


def report_progress(ctx: MasterContext, who: Caller, trial_id: int, progress: float) -> None:
    with ctx.db.session() as s:
        trial = trial_for_report(s, who, trial_id)
        before = search_progress.before_report(trial)
        trial.summary_metrics = {**(trial.summary_metrics or {}), "progress": progress}
        nudge = search_progress.measure(s, trial, before)
    search_progress.apply(ctx.db, nudge)


def completed_operation(ctx: MasterContext, who: Caller, trial_id: int, length: Any) -> None:
    with ctx.db.session() as s:
        trial = trial_for_report(s, who, trial_id)
        before = search_progress.before_report(trial)
        if isinstance(length, int) and not isinstance(length, bool) and length > trial.total_batches:
            # never past the searcher's own target: the op cannot claim more than was asked of it
            trial.total_batches = min(length, trial.target_length) if trial.target_length else length
        elif trial.target_length and trial.total_batches < trial.target_length:
            trial.total_batches = trial.target_length
        nudge = search_progress.measure(s, trial, before)
    search_progress.apply(ctx.db, nudge)


def early_exit(ctx: MasterContext, who: Caller, trial_id: int, reason: str) -> None:
    with ctx.db.session() as s:
        trial = trial_for_report(s, who, trial_id)
        trial.end_reason = f"early exit: {reason}"[:1024]


def run_start(ctx: MasterContext, who: Caller) -> None:
    """Determined's harness announces its run; pedl only checks the token is a live task's."""
    with ctx.db.read_session() as s:
        require_task(s, who)


def runner_metadata(ctx: MasterContext, who: Caller, trial_id: int) -> None:
    """Determined's harness reports its runner state; pedl keeps nothing of it."""
    with ctx.db.read_session() as s:
        trial_for_report(s, who, trial_id)
