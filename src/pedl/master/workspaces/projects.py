"""Projects (Determined's): every experiment belongs to one. Creating them (in a workspace other than
the immutable Uncategorized), listing them with their experiment counts, and choosing the project a
new experiment goes into."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import Integer, cast, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity.authz import require_user
from pedl.master.lifecycle.states import ExperimentState
from pedl.master.wire.project import Project
from pedl.master.workspaces import to_wire, workspaces
from pedl.master.workspaces.workspaces import DEFAULT_ID, DEFAULT_NAME, checked_name, name_key

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_KEY = 5  # Determined's project keys: up to five letters or digits


@dataclass(frozen=True)
class Placement:
    """Where an experiment is, as its API object shows it."""

    project_name: str = DEFAULT_NAME
    project_owner_id: int = 0
    workspace_id: int = DEFAULT_ID
    workspace_name: str = DEFAULT_NAME


def checked_key(key: str | None, name: str) -> str:
    """The key given (1 to 5 letters or digits), else one made from the name, as Determined does."""
    if key:
        if len(key) > MAX_KEY or not key.isascii() or not key.isalnum():
            raise InvalidArgument.at("key", f"1 to {MAX_KEY} letters or digits")
        return key.upper()
    made = "".join(ch for ch in name if ch.isascii() and ch.isalnum()).upper()[:MAX_KEY]
    return made or "PROJ"


def get(s: Session, project_id: int) -> models.Project:
    project = s.get(models.Project, project_id)
    if project is None:
        raise NotFound(f"project {project_id} not found")
    return project


def in_workspace(s: Session, workspace_id: int, name: str) -> models.Project | None:
    return s.scalar(
        select(models.Project).where(
            models.Project.workspace_id == workspace_id, models.Project.name_key == name_key(name)
        )
    )


def create(
    ctx: MasterContext, who: Caller, workspace_id: int, name: str, description: str | None, key: str | None
) -> Project:
    """A new project of the caller's in the workspace; a name the workspace has (in any case) is a 409."""
    owner = require_user(who, "create projects")
    checked_name(name, "name")
    project_key = checked_key(key, name)
    try:
        with ctx.db.session() as s:
            ws = workspaces.get(s, workspace_id)
            if ws.immutable or ws.archived:
                why = "immutable" if ws.immutable else "archived"
                raise InvalidArgument.at(
                    "workspaceId",
                    f"workspace {ws.name!r} is {why} and takes no new projects, "
                    "as in Determined; create a workspace of your own for them",
                )
            if in_workspace(s, ws.id, name) is not None:
                raise _taken(name, ws.name)
            project = models.Project(
                workspace_id=ws.id,
                name=name,
                name_key=name_key(name),
                description=description or "",
                key=project_key,
                owner_id=owner.id,
                immutable=False,
                archived=False,
                created_at=ctx.clock.now(),
            )
            s.add(project)
            s.flush()
            return shown(s, [project])[0]
    except IntegrityError:  # another request took the name between the check and the insert
        raise _taken(name, str(workspace_id)) from None


def _taken(name: str, workspace: str) -> Conflict:
    return Conflict(
        f"name: workspace {workspace!r} has a project named {name!r} already (names are unique in a "
        "workspace whatever their case)",
        fields=[{"field": "name", "message": "taken"}],
    )


def shown(s: Session, rows: list[models.Project]) -> list[Project]:
    """The rows as the API shows them, with their workspaces, owners and counts, in four queries whatever
    the number of rows."""
    E = models.Experiment
    ids = [p.id for p in rows]
    places = {
        wid: (name, archived)
        for wid, name, archived in s.execute(
            select(models.Workspace.id, models.Workspace.name, models.Workspace.archived).where(
                models.Workspace.id.in_({p.workspace_id for p in rows})
            )
        )
    }
    owners = dict(
        s.execute(
            select(models.User.id, models.User.username).where(
                models.User.id.in_({p.owner_id for p in rows if p.owner_id is not None})
            )
        ).all()
    )
    active = func.sum(cast(E.state == ExperimentState.ACTIVE, Integer))
    counts = {
        pid: (n, a or 0, last)
        for pid, n, a, last in s.execute(
            select(E.project_id, func.count(), active, func.max(E.start_time))
            .where(E.project_id.in_(ids))
            .group_by(E.project_id)
        )
    }
    runs = dict(
        s.execute(
            select(E.project_id, func.count(models.Trial.id))
            .join(models.Trial, models.Trial.experiment_id == E.id)
            .where(E.project_id.in_(ids))
            .group_by(E.project_id)
        ).all()
    )
    out = []
    for p in rows:
        n, a, last = counts.get(p.id, (0, 0, None))
        ws_name, ws_archived = places.get(p.workspace_id, ("", False))
        out.append(
            to_wire.project(
                p,
                workspace_name=ws_name,
                username=owners.get(p.owner_id, "") if p.owner_id else "",
                num_experiments=n,
                num_active_experiments=a,
                num_runs=runs.get(p.id, 0),
                last_experiment_started_at=last,
                archived=p.archived or ws_archived,
            )
        )
    return out


@dataclass(frozen=True)
class ProjectQuery:
    workspace_id: int = 0  # 0: every workspace's
    offset: int = 0
    limit: int = 0
    name: str | None = None  # whole name, any case
    archived: bool | None = None
    usernames: list[str] = field(default_factory=list)
    user_ids: list[int] = field(default_factory=list)
    sort_by: str | None = None
    order_by: str | None = None


def _last_started():  # a column expression
    return (
        select(func.max(models.Experiment.start_time))
        .where(models.Experiment.project_id == models.Project.id)
        .correlate(models.Project)
        .scalar_subquery()
    )


SORTS = {
    "SORT_BY_UNSPECIFIED": lambda: models.Project.id,
    "SORT_BY_ID": lambda: models.Project.id,
    "SORT_BY_NAME": lambda: func.lower(models.Project.name),  # any case, the same on both databases
    "SORT_BY_DESCRIPTION": lambda: models.Project.description,
    "SORT_BY_CREATION_TIME": lambda: models.Project.created_at,
    "SORT_BY_LAST_EXPERIMENT_START_TIME": _last_started,
}


@dataclass(frozen=True)
class ProjectPage:
    """One page of projects as the API sends them, how many match, and the page's limit (at most
    workspaces.MAX_PAGE, whatever the query asked)."""

    items: list[Project]
    total: int
    limit: int


def listing(ctx: MasterContext, q: ProjectQuery) -> ProjectPage:
    """One page of a workspace's projects, or every workspace's."""
    P = models.Project
    key = workspaces.sort_key(SORTS, q.sort_by)
    descending, limit = workspaces.is_descending(q.order_by), workspaces.page_limit(q.limit)
    stmt = select(P)
    if q.workspace_id:
        stmt = stmt.where(P.workspace_id == q.workspace_id)
    if q.name:
        stmt = stmt.where(P.name_key == name_key(q.name))
    if q.archived is not None:
        archived = P.archived.is_(True) | P.workspace_id.in_(
            select(models.Workspace.id).where(models.Workspace.archived.is_(True))
        )
        stmt = stmt.where(archived if q.archived else ~archived)
    if q.usernames:
        stmt = stmt.where(P.owner_id.in_(select(models.User.id).where(models.User.username.in_(q.usernames))))
    if q.user_ids:
        stmt = stmt.where(P.owner_id.in_(q.user_ids))
    with ctx.db.read_session() as s:
        if q.workspace_id:
            workspaces.get(s, q.workspace_id)
        total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        order = (key.desc().nulls_last(), P.id.desc()) if descending else (key.asc().nulls_last(), P.id.asc())
        rows = list(s.scalars(stmt.order_by(*order).offset(q.offset).limit(limit)))
        return ProjectPage(shown(s, rows), total, limit)


def describe(ctx: MasterContext, project_id: int) -> Project:
    with ctx.db.read_session() as s:
        return shown(s, [get(s, project_id)])[0]


def placements(s: Session, project_ids: set[int]) -> dict[int, Placement]:
    """Each project's name, owner and workspace, in one query (a project gone missing is absent)."""
    P, W = models.Project, models.Workspace
    rows = s.execute(
        select(P.id, P.name, P.owner_id, W.id, W.name).join(W, W.id == P.workspace_id).where(P.id.in_(project_ids))
    )
    return {pid: Placement(name, owner or 0, wid, wname) for pid, name, owner, wid, wname in rows}


def for_experiment(s: Session, project_id: int | None, workspace: str | None, project: str | None) -> int:
    """The project a new experiment goes into: `projectId` when given (it must exist), else the one the
    config's `workspace` and `project` name (both, or neither), else project 1. Both given must agree."""
    named = None
    if workspace or project:
        if not workspace:
            raise InvalidArgument.at("workspace", "the config names a project: name its workspace too")
        if not project:
            raise InvalidArgument.at("project", "the config names a workspace: name its project too")
        ws = workspaces.by_name(s, workspace)
        if ws is None:
            raise InvalidArgument.at("workspace", f"no workspace named {workspace!r}")
        named = in_workspace(s, ws.id, project)
        if named is None:
            raise InvalidArgument.at("project", f"workspace {ws.name!r} has no project named {project!r}")
    if not project_id:  # det sends null without --project_id
        chosen = named or get(s, DEFAULT_ID)
        _open_for_launches(s, chosen, "project" if named is not None else "projectId")
        return chosen.id
    given = s.get(models.Project, project_id)
    if given is None:
        raise NotFound(
            f"projectId: project {project_id} not found", fields=[{"field": "projectId", "message": "not found"}]
        )
    if named is not None and named.id != given.id:
        raise InvalidArgument.at(
            "projectId", f"project {project_id} is not the config's project {workspace}/{project} (project {named.id})"
        )
    _open_for_launches(s, given, "projectId")
    return given.id


def _open_for_launches(s: Session, project: models.Project, where: str) -> None:
    """Determined launches nothing into an archived project or workspace."""
    ws = s.get(models.Workspace, project.workspace_id)
    what = (
        f"project {project.name!r}"
        if project.archived
        else f"workspace {ws.name!r}"
        if ws is not None and ws.archived
        else None
    )
    if what is not None:
        raise InvalidArgument.at(where, f"{what} is archived and takes no new experiments; unarchive it first")
