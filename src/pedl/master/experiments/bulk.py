"""Determined's bulk experiment actions (POST /projects/{id}/experiments/{kill,pause,...}): the
experiments named by id, or those a filter matches, each acted on as its single-experiment route does.
A failure is that experiment's `error` in the results (Determined's v1ExperimentActionResult), not the
request's. Bounded: at most MAX_IDS ids, and a filter that matches more than MAX_FILTERED is refused."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import func, select

from pedl.errors import InvalidArgument, PedlError
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments import deletion as experiment_deletion
from pedl.master.experiments import edits as experiment_edits
from pedl.master.experiments import moves as experiment_moves
from pedl.master.experiments import service as experiments_service
from pedl.master.experiments.labels import having_any
from pedl.master.identity.authz import require_user
from pedl.master.lifecycle.states import ENDED_EXPERIMENT, ExperimentState
from pedl.master.wire.experiment import ExperimentActionResult

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_IDS = 1000
MAX_FILTERED = 1000
ACTIONS = ("kill", "pause", "activate", "cancel", "archive", "unarchive", "delete", "move")
_NOT_ENDED = [
    ExperimentState.ACTIVE,
    ExperimentState.PAUSED,
    ExperimentState.STOPPING_COMPLETED,
    ExperimentState.STOPPING_CANCELED,
    ExperimentState.STOPPING_ERROR,
]
# what a filter matches for each action, as Determined narrows its bulk filters (ids are not narrowed:
# an experiment in another state gets its error)
_FILTER_STATES: dict[str, Sequence[str]] = {
    "kill": _NOT_ENDED,
    "cancel": _NOT_ENDED,
    "pause": [ExperimentState.ACTIVE],
    "activate": [ExperimentState.PAUSED],
    "archive": sorted(ENDED_EXPERIMENT),
    "delete": sorted(ENDED_EXPERIMENT),
}
# Determined's derived substates of ACTIVE (lifecycle/states.py) name ACTIVE experiments in a filter
_SUBSTATES = {"STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING"}


@dataclass(frozen=True)
class BulkFilters:
    """Determined's v1BulkExperimentFilters."""

    name: str | None = None  # a part of the name, any case
    description: str | None = None  # a part of the description, any case
    labels: list[str] = field(default_factory=list)  # any of them
    archived: bool | None = None
    states: list[str] = field(default_factory=list)
    user_ids: list[int] = field(default_factory=list)
    project_id: int | None = None
    excluded_ids: list[int] = field(default_factory=list)


def _matching(ctx: MasterContext, who: Caller, action: str, project_id: int, f: BulkFilters) -> list[int]:
    """The ids a filter matches among the experiments the caller may edit (its own; every one for an
    admin), in the project when one is given (> 0)."""
    E = models.Experiment
    stmt = select(E.id).where(E.state.notin_([ExperimentState.DELETING]))
    user = who.user
    if not user.admin:
        stmt = stmt.where(E.owner_id == user.id)
    for pid in (project_id, f.project_id or 0):
        if pid > 0:
            stmt = stmt.where(E.project_id == pid)
    if f.name:
        stmt = stmt.where(func.lower(E.name).contains(f.name.lower(), autoescape=True))
    if f.description:
        stmt = stmt.where(func.lower(E.description).contains(f.description.lower(), autoescape=True))
    if f.labels:
        stmt = stmt.where(having_any(f.labels))
    if f.archived is not None:
        stmt = stmt.where(E.archived.is_(f.archived))
    if f.states:
        states = {ExperimentState.ACTIVE if s in _SUBSTATES else s for s in f.states}
        stmt = stmt.where(E.state.in_(sorted(states)))
    if f.user_ids:
        stmt = stmt.where(E.owner_id.in_(f.user_ids))
    if f.excluded_ids:
        stmt = stmt.where(E.id.notin_(f.excluded_ids))
    if action in _FILTER_STATES:
        stmt = stmt.where(E.state.in_(_FILTER_STATES[action]))
    if action in ("archive", "unarchive"):
        stmt = stmt.where(E.archived.is_(action == "unarchive"))
    with ctx.db.read_session() as s:
        ids = list(s.scalars(stmt.order_by(E.id).limit(MAX_FILTERED + 1)))
    if len(ids) > MAX_FILTERED:
        raise InvalidArgument.at(
            "filters",
            f"matches more than {MAX_FILTERED} experiments; narrow it, or name the experiments in experimentIds",
        )
    return ids


def check_ids(ids: list[int]) -> list[int]:
    if len(ids) > MAX_IDS:
        raise InvalidArgument.at("experimentIds", f"at most {MAX_IDS} experiments in one request ({len(ids)} given)")
    return list(dict.fromkeys(ids))


def act(
    ctx: MasterContext,
    who: Caller,
    action: str,
    project_id: int,
    ids: list[int],
    filters: BulkFilters | None,
    *,
    destination: int = 0,
    wake_deletion: Callable[[int], None] | None = None,
) -> list[ExperimentActionResult]:
    """Do `action` to each experiment -> its id and error, "" for done, per experiment."""
    require_user(who, f"{action} experiments")
    chosen = _matching(ctx, who, action, project_id, filters) if filters is not None else check_ids(ids)
    one = _one(ctx, who, action, destination, wake_deletion)
    results: list[ExperimentActionResult] = []
    for experiment_id in chosen:
        try:
            one(experiment_id)
            results.append(ExperimentActionResult(id=experiment_id, error=""))
        except PedlError as e:
            results.append(ExperimentActionResult(id=experiment_id, error=e.message))
    return results


def _one(
    ctx: MasterContext, who: Caller, action: str, destination: int, wake_deletion: Callable[[int], None] | None
) -> Callable[[int], object]:
    if action in ("kill", "cancel", "pause", "activate"):
        verb = "kill" if action == "cancel" else action
        return lambda eid: experiments_service.act(ctx, who, eid, verb)
    if action in ("archive", "unarchive"):
        return lambda eid: experiment_edits.set_archived(ctx, who, eid, action == "archive")
    if action == "move":
        return lambda eid: experiment_moves.move(ctx, who, eid, destination)
    if action == "delete":
        assert wake_deletion is not None
        return lambda eid: experiment_deletion.request_deletion(ctx, who, eid, wake_deletion)
    raise InvalidArgument(f"unknown bulk action {action!r} (one of {', '.join(ACTIONS)})")
