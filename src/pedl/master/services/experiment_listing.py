"""The experiments listing: filters (state, user, label, name, archived), sorting on the server,
pages, and each listed experiment's trial counts and best searcher metric, in a bounded number of
queries per page whatever the number of experiments."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy import ColumnElement, Integer, case, cast, func, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.lifecycle import TrialState
from pedl.master.services.experiment_labels import having_any

ACTIVE_TRIAL_STATES = (TrialState.QUEUED, TrialState.RUNNING, TrialState.STOPPING_COMPLETED,
                       TrialState.STOPPING_CANCELED, TrialState.STOPPING_ERROR)
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


def _trial_count() -> ColumnElement[int]:
    return (select(func.count()).where(models.Trial.experiment_id == models.Experiment.id)
            .correlate(models.Experiment).scalar_subquery())


def _best_searcher_metric() -> ColumnElement[float]:
    """The experiment's best trial searcher metric (what `stats` shows as best_metric): the smallest
    of its trials' best metrics, the largest when the searcher's smaller_is_better is false; NULL
    while no trial has one."""

    def over_trials(aggregate: ColumnElement[float]) -> ColumnElement[float]:
        return select(aggregate).where(models.Trial.experiment_id == models.Experiment.id) \
            .correlate(models.Experiment).scalar_subquery()

    larger_is_better = models.Experiment.config[("searcher", "smaller_is_better")].as_boolean().is_(False)
    return case((larger_is_better, over_trials(func.max(models.Trial.best_metric))),
                else_=over_trials(func.min(models.Trial.best_metric)))


def _username() -> ColumnElement[str]:
    return select(models.User.username).where(models.User.id == models.Experiment.owner_id) \
        .correlate(models.Experiment).scalar_subquery()


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
    if q.usernames:
        stmt = stmt.where(models.Experiment.owner_id.in_(
            select(models.User.id).where(models.User.username.in_(q.usernames))))
    if q.states:
        stmt = stmt.where(models.Experiment.state.in_(q.states))
    if q.name:
        stmt = stmt.where(func.lower(models.Experiment.name).contains(q.name.lower(), autoescape=True))
    if q.labels:
        stmt = stmt.where(having_any(q.labels))
    if q.project_id:
        stmt = stmt.where(models.Experiment.project_id == q.project_id)
    total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    key = SORTS[q.sort_by]()
    ordered = (key.desc().nulls_last(), models.Experiment.id.desc()) if q.newest_first else (
        key.asc().nulls_last(), models.Experiment.id)
    rows = list(s.scalars(stmt.order_by(*ordered).offset(q.offset).limit(q.limit if q.limit > 0 else None)))
    return rows, total


def stats(s: Session, experiments: list[models.Experiment]) -> dict[int, ExperimentStats]:
    """Trial counts (all, active) and the best trial by searcher metric of each experiment, in two
    queries."""
    if not experiments:
        return {}
    ids = [e.id for e in experiments]
    active = func.sum(cast(models.Trial.state.in_(ACTIVE_TRIAL_STATES), Integer))
    counts = {eid: (n, int(a or 0)) for eid, n, a in s.execute(
        select(models.Trial.experiment_id, func.count(), active)
        .where(models.Trial.experiment_id.in_(ids)).group_by(models.Trial.experiment_id))}
    scored = s.execute(select(models.Trial.experiment_id, models.Trial.id, models.Trial.best_metric)
                       .where(models.Trial.experiment_id.in_(ids), models.Trial.best_metric.is_not(None)))
    best: dict[int, tuple[float, int]] = {}
    smaller = {e.id: e.config.get("searcher", {}).get("smaller_is_better", True) is not False for e in experiments}
    for eid, tid, value in scored:
        held = best.get(eid)
        if held is None or (value < held[0] if smaller[eid] else value > held[0]):
            best[eid] = (value, tid)
    return {eid: ExperimentStats(num_trials=counts.get(eid, (0, 0))[0], active_trials=counts.get(eid, (0, 0))[1],
                                 best_metric=best[eid][0] if eid in best else None,
                                 best_trial_id=best[eid][1] if eid in best else None) for eid in ids}
