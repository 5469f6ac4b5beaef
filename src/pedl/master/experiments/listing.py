"""The experiments listing: filters (state, user, label, name, archived), sorting on the server,
pages, and each listed experiment's trial counts, best searcher metric and reported state (an active
one's QUEUED / STARTING / RUNNING), in a bounded number of queries per page whatever the number of
experiments."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Integer, and_, case, cast, func, or_, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.checkpoints import totals as checkpoint_totals
from pedl.master.checkpoints.totals import NONE as NO_CHECKPOINTS
from pedl.master.checkpoints.totals import CheckpointTotals
from pedl.master.db import models
from pedl.master.experiments.labels import having_any
from pedl.master.lifecycle.states import (
    ACTIVE_SUBSTATES,
    LIVE_ALLOCATION,
    RUN_PROGRESS,
    ExperimentState,
    TrialState,
    reported_experiment_state,
)

ACTIVE_TRIAL_STATES = (
    TrialState.QUEUED,
    TrialState.RUNNING,
    TrialState.STOPPING_COMPLETED,
    TrialState.STOPPING_CANCELED,
    TrialState.STOPPING_ERROR,
)
NAME_LIMIT = 256


@dataclass(frozen=True)
class ExperimentQuery:
    offset: int = 0
    limit: int = 0  # 0: all
    archived: bool | None = None
    usernames: list[str] = field(default_factory=list)
    states: list[str] = field(default_factory=list)
    name: str = ""  # a part of the name, any case
    labels: list[str] = field(default_factory=list)  # any of them
    sort_by: str = "SORT_BY_ID"  # Determined's v1GetExperimentsRequestSortBy
    newest_first: bool = False  # ORDER_BY_DESC
    project_id: int = 0  # 0: every project's


@dataclass(frozen=True)
class ExperimentStats:
    num_trials: int = 0
    active_trials: int = 0
    best_metric: float | None = None
    best_trial_id: int | None = None
    state: str | None = None  # what the API reports (lifecycle.reported_experiment_state); None: the stored one
    checkpoints: CheckpointTotals = NO_CHECKPOINTS  # its trials' checkpoints not DELETED, and their bytes


def _trial_count() -> ColumnElement[int]:
    return (
        select(func.count())
        .where(models.Trial.experiment_id == models.Experiment.id)
        .correlate(models.Experiment)
        .scalar_subquery()
    )


def _best_searcher_metric() -> ColumnElement[float | None]:
    """The experiment's best trial searcher metric (what `stats` shows as best_metric): the smallest
    of its trials' best metrics, the largest when the searcher's smaller_is_better is false; NULL
    while no trial has one."""

    def over_trials(aggregate: ColumnElement[float | None]) -> ColumnElement[float | None]:
        return (
            select(aggregate)
            .where(models.Trial.experiment_id == models.Experiment.id)
            .correlate(models.Experiment)
            .scalar_subquery()
        )

    larger_is_better = models.Experiment.config[("searcher", "smaller_is_better")].as_boolean().is_(False)
    return case(
        (larger_is_better, over_trials(func.max(models.Trial.best_metric))),
        else_=over_trials(func.min(models.Trial.best_metric)),
    )


def _progress() -> ColumnElement[int]:
    """How far the furthest live allocation of a trial of the experiment got (lifecycle.RUN_PROGRESS)."""
    A = models.Allocation
    return case(*((A.state == state, rank) for state, rank in RUN_PROGRESS.items()), else_=0)


def _furthest() -> ColumnElement[int]:
    A = models.Allocation
    return (
        select(func.max(_progress()))
        .select_from(A)
        .join(models.Trial, models.Trial.id == A.trial_id)
        .where(models.Trial.experiment_id == models.Experiment.id, A.state.in_(LIVE_ALLOCATION))
        .correlate(models.Experiment)
        .scalar_subquery()
    )


def _in_states(states: list[str]) -> ColumnElement[bool]:
    """The experiments reported in one of `states`: STATE_ACTIVE takes every active one (the others
    of ACTIVE_SUBSTATES are its substates), a substate those whose allocations got that far."""
    stored = [st for st in states if st not in ACTIVE_SUBSTATES]
    wanted = {
        rank for rank in set(RUN_PROGRESS.values()) if reported_experiment_state(ExperimentState.ACTIVE, rank) in states
    }
    conditions: list[ColumnElement[bool]] = [models.Experiment.state.in_(stored)]
    if wanted and ExperimentState.ACTIVE not in stored:
        conditions.append(
            and_(models.Experiment.state == ExperimentState.ACTIVE, func.coalesce(_furthest(), 0).in_(sorted(wanted)))
        )
    return or_(*conditions)


def _username() -> ColumnElement[str]:
    return (
        select(models.User.username)
        .where(models.User.id == models.Experiment.owner_id)
        .correlate(models.Experiment)
        .scalar_subquery()
    )


SORTS = {
    "SORT_BY_UNSPECIFIED": lambda: models.Experiment.id,
    "SORT_BY_ID": lambda: models.Experiment.id,
    "SORT_BY_NAME": lambda: models.Experiment.name,
    "SORT_BY_DESCRIPTION": lambda: models.Experiment.description,
    "SORT_BY_START_TIME": lambda: models.Experiment.start_time,
    "SORT_BY_END_TIME": lambda: models.Experiment.end_time,
    "SORT_BY_STATE": lambda: models.Experiment.state,
    "SORT_BY_PROGRESS": lambda: models.Experiment.progress,
    "SORT_BY_USER": _username,
    "SORT_BY_NUM_TRIALS": _trial_count,
    "SORT_BY_RESOURCE_POOL": lambda: models.Experiment.resource_pool,
    "SORT_BY_FORKED_FROM": lambda: models.Experiment.parent_id,
    "SORT_BY_PROJECT_ID": lambda: models.Experiment.project_id,
    "SORT_BY_SEARCHER_METRIC_VAL": _best_searcher_metric,
}


def check(q: ExperimentQuery) -> None:
    if q.sort_by not in SORTS:
        raise InvalidArgument.at("sortBy", f"{q.sort_by!r} is not one of {', '.join(sorted(SORTS))}")
    if len(q.name) > NAME_LIMIT:
        raise InvalidArgument.at("name", f"at most {NAME_LIMIT} characters")


def page(s: Session, q: ExperimentQuery) -> tuple[list[models.Experiment], int]:
    check(q)
    stmt = select(models.Experiment)
    if q.archived is not None:
        stmt = stmt.where(models.Experiment.archived.is_(q.archived))
    if q.archived is False and not q.project_id:
        # as Determined: unarchived means in an unarchived project of an unarchived workspace too, unless
        # the listing is one project's
        P, W = models.Project, models.Workspace
        shelved = select(P.id).join(W, W.id == P.workspace_id).where(P.archived.is_(True) | W.archived.is_(True))
        stmt = stmt.where(models.Experiment.project_id.notin_(shelved))
    if q.usernames:
        stmt = stmt.where(
            models.Experiment.owner_id.in_(select(models.User.id).where(models.User.username.in_(q.usernames)))
        )
    if q.states:
        stmt = stmt.where(_in_states(q.states))
    if q.name:
        stmt = stmt.where(func.lower(models.Experiment.name).contains(q.name.lower(), autoescape=True))
    if q.labels:
        stmt = stmt.where(having_any(q.labels))
    if q.project_id:
        stmt = stmt.where(models.Experiment.project_id == q.project_id)
    total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    key = SORTS[q.sort_by]()
    ordered = (
        (key.desc().nulls_last(), models.Experiment.id.desc())
        if q.newest_first
        else (key.asc().nulls_last(), models.Experiment.id)
    )
    rows = list(s.scalars(stmt.order_by(*ordered).offset(q.offset).limit(q.limit if q.limit > 0 else None)))
    return rows, total


def furthest(s: Session, experiment_ids: list[int]) -> dict[int, int]:
    """How far the furthest live allocation of each experiment's trials got (RUN_PROGRESS), in one
    grouped query; experiments without a live allocation are absent."""
    if not experiment_ids:
        return {}
    A = models.Allocation
    return {
        eid: rank
        for eid, rank in s.execute(
            select(models.Trial.experiment_id, func.max(_progress()))
            .select_from(A)
            .join(models.Trial, models.Trial.id == A.trial_id)
            .where(models.Trial.experiment_id.in_(experiment_ids), A.state.in_(LIVE_ALLOCATION))
            .group_by(models.Trial.experiment_id)
        )
    }


def reported_state(s: Session, exp: models.Experiment) -> str:
    """The state the API shows for one experiment (an ACTIVE one as far as its trials got)."""
    if exp.state != ExperimentState.ACTIVE:
        return exp.state
    return reported_experiment_state(exp.state, furthest(s, [exp.id]).get(exp.id))


def stats(s: Session, experiments: list[models.Experiment]) -> dict[int, ExperimentStats]:
    """Trial counts (all, active), the best trial by searcher metric, the reported state and the
    checkpoint totals of each experiment, in at most four queries."""
    if not experiments:
        return {}
    ids = [e.id for e in experiments]
    active = func.sum(cast(models.Trial.state.in_(ACTIVE_TRIAL_STATES), Integer))
    counts = {
        eid: (n, int(a or 0))
        for eid, n, a in s.execute(
            select(models.Trial.experiment_id, func.count(), active)
            .where(models.Trial.experiment_id.in_(ids))
            .group_by(models.Trial.experiment_id)
        )
    }
    scored = s.execute(
        select(models.Trial.experiment_id, models.Trial.id, models.Trial.best_metric).where(
            models.Trial.experiment_id.in_(ids), models.Trial.best_metric.is_not(None)
        )
    )
    best: dict[int, tuple[float, int]] = {}
    smaller = {e.id: e.config.get("searcher", {}).get("smaller_is_better", True) is not False for e in experiments}
    for eid, tid, value in scored:
        if value is None:  # (the query took none)
            continue
        held = best.get(eid)
        if held is None or (value < held[0] if smaller[eid] else value > held[0]):
            best[eid] = (value, tid)
    progress = furthest(s, [e.id for e in experiments if e.state == ExperimentState.ACTIVE])
    kept = checkpoint_totals.of_experiments(s, ids)
    return {
        e.id: ExperimentStats(
            num_trials=counts.get(e.id, (0, 0))[0],
            active_trials=counts.get(e.id, (0, 0))[1],
            best_metric=best[e.id][0] if e.id in best else None,
            best_trial_id=best[e.id][1] if e.id in best else None,
            state=reported_experiment_state(e.state, progress.get(e.id)),
            checkpoints=kept.get(e.id, NO_CHECKPOINTS),
        )
        for e in experiments
    }
