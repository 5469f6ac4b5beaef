"""Workspaces (Determined's): the default one, Uncategorized, and those users create, listed with their
project and experiment counts. Names are unique whatever their case, as in Determined."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select, text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity.authz import require_user
from pedl.master.wire.workspace import Workspace
from pedl.master.workspaces import to_wire
from pedl.master.workspaces.workspace_storage import checked_storage

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

DEFAULT_ID = 1  # workspace 1 and project 1, both made by migration 0007
DEFAULT_NAME = "Uncategorized"
MAX_NAME = 255
MAX_PAGE = 1000  # rows per page, whatever limit asks (0: this many); clients page on with offset
ORDERS = ("", "ORDER_BY_UNSPECIFIED", "ORDER_BY_ASC", "ORDER_BY_DESC")


def name_key(name: str) -> str:
    return name.casefold()


def checked_name(name: str, where: str) -> str:
    """A workspace's, project's or template's name: not blank, at most 255 characters, no control
    characters (it is shown in tables and sent in URLs)."""
    if not name.strip():
        raise InvalidArgument.at(where, "must not be empty")
    if len(name) > MAX_NAME:
        raise InvalidArgument.at(where, f"at most {MAX_NAME} characters")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in name):
        raise InvalidArgument.at(where, "must not contain control characters")
    return name


def page_limit(limit: int) -> int:
    return MAX_PAGE if limit <= 0 else min(limit, MAX_PAGE)


def is_descending(order_by: str | None) -> bool:
    if (order_by or "") not in ORDERS:
        raise InvalidArgument.at("orderBy", f"{order_by!r} is not one of {', '.join(ORDERS[1:])}")
    return order_by == "ORDER_BY_DESC"


def sort_key(sorts: dict, sort_by: str | None):  # a column expression
    if (sort_by or "SORT_BY_UNSPECIFIED") not in sorts:
        raise InvalidArgument.at("sortBy", f"{sort_by!r} is not one of {', '.join(sorts)}")
    return sorts[sort_by or "SORT_BY_UNSPECIFIED"]()


def ensure_defaults(s: Session, now: float) -> None:
    """Workspace 1 and project 1 exist (migration 0007 made them; a database emptied table by table
    lost them) and are owned by the admin user once there is one."""
    admin = s.scalar(select(models.User.id).where(models.User.username == "admin"))
    ws = s.get(models.Workspace, DEFAULT_ID)
    if ws is None:
        s.add(
            models.Workspace(
                id=DEFAULT_ID,
                name=DEFAULT_NAME,
                name_key=name_key(DEFAULT_NAME),
                owner_id=admin,
                immutable=True,
                archived=False,
                created_at=now,
            )
        )
        s.flush()
        _sequence_past(s, "workspaces")
    elif ws.owner_id is None:
        ws.owner_id = admin
    project = s.get(models.Project, DEFAULT_ID)
    if project is None:
        s.add(
            models.Project(
                id=DEFAULT_ID,
                workspace_id=DEFAULT_ID,
                name=DEFAULT_NAME,
                name_key=name_key(DEFAULT_NAME),
                description="",
                key="UNCAT",
                owner_id=admin,
                immutable=True,
                archived=False,
                created_at=now,
            )
        )
        s.flush()
        _sequence_past(s, "projects")
    elif project.owner_id is None:
        project.owner_id = admin


def _sequence_past(s: Session, table: str) -> None:
    """On PostgreSQL a row inserted with its id by hand leaves the id sequence behind it."""
    if s.get_bind().dialect.name == "postgresql":
        s.execute(text(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT MAX(id) FROM {table}))"))


def get(s: Session, workspace_id: int) -> models.Workspace:
    ws = s.get(models.Workspace, workspace_id)
    if ws is None:
        raise NotFound(f"workspace {workspace_id} not found")
    return ws


def by_name(s: Session, name: str) -> models.Workspace | None:
    return s.scalar(select(models.Workspace).where(models.Workspace.name_key == name_key(name)))


def shown(s: Session, rows: list[models.Workspace], viewer: int = 0) -> list[Workspace]:
    """The rows as the API shows them, with their owners, counts and whether `viewer` pinned them, in four
    queries whatever the number of rows."""
    ids = [w.id for w in rows]
    pins = set(
        s.scalars(
            select(models.WorkspacePin.workspace_id).where(
                models.WorkspacePin.user_id == viewer, models.WorkspacePin.workspace_id.in_(ids)
            )
        )
    )
    owners = {
        uid: name
        for uid, name in s.execute(
            select(models.User.id, models.User.username).where(
                models.User.id.in_({w.owner_id for w in rows if w.owner_id is not None})
            )
        )
    }
    projects = dict(
        s.execute(
            select(models.Project.workspace_id, func.count())
            .where(models.Project.workspace_id.in_(ids))
            .group_by(models.Project.workspace_id)
        ).all()
    )
    experiments = dict(
        s.execute(
            select(models.Project.workspace_id, func.count(models.Experiment.id))
            .join(models.Experiment, models.Experiment.project_id == models.Project.id)
            .where(models.Project.workspace_id.in_(ids))
            .group_by(models.Project.workspace_id)
        ).all()
    )
    return [
        to_wire.workspace(
            w,
            username=owners.get(w.owner_id, "") if w.owner_id is not None else "",
            num_projects=projects.get(w.id, 0),
            num_experiments=experiments.get(w.id, 0),
            pinned=w.id in pins,
        )
        for w in rows
    ]


def create(ctx: MasterContext, who: Caller, name: str, storage: dict[str, Any] | None = None) -> Workspace:
    """A new workspace owned by the caller, with the checkpoint storage given (checked as an experiment's);
    a name another workspace has (in any case) is a 409."""
    owner = require_user(who, "create workspaces")
    checked_name(name, "name")
    stored = checked_storage(ctx.config, storage) if storage is not None else None
    try:
        with ctx.db.session() as s:
            if by_name(s, name) is not None:
                raise _taken(name)
            ws = models.Workspace(
                name=name,
                name_key=name_key(name),
                owner_id=owner.id,
                immutable=False,
                archived=False,
                created_at=ctx.clock.now(),
                checkpoint_storage=stored,
            )
            s.add(ws)
            s.flush()
            s.add(models.WorkspacePin(workspace_id=ws.id, user_id=owner.id))  # Determined pins it for its creator
            s.flush()
            return shown(s, [ws], owner.id)[0]
    except IntegrityError:  # another request took the name between the check and the insert
        raise _taken(name) from None


def _taken(name: str) -> Conflict:
    return Conflict(
        f"name: a workspace named {name!r} exists already (names are unique whatever their case)",
        fields=[{"field": "name", "message": "taken"}],
    )


@dataclass(frozen=True)
class WorkspaceQuery:
    offset: int = 0
    limit: int = 0
    name: str | None = None  # whole name, any case
    name_case_sensitive: str | None = None  # whole name, this case
    archived: bool | None = None
    pinned: bool | None = None  # pinned by the caller (true) or not (false)
    viewer: int = 0  # the caller's user id
    usernames: list[str] = field(default_factory=list)
    user_ids: list[int] = field(default_factory=list)
    sort_by: str | None = None
    order_by: str | None = None


SORTS = {
    "SORT_BY_UNSPECIFIED": lambda: models.Workspace.id,
    "SORT_BY_ID": lambda: models.Workspace.id,
    "SORT_BY_NAME": lambda: func.lower(models.Workspace.name),
}  # any case, the same on both databases


@dataclass(frozen=True)
class WorkspacePage:
    """One page of workspaces as the API sends them, how many match, and the page's limit (at most
    MAX_PAGE, whatever the query asked)."""

    items: list[Workspace]
    total: int
    limit: int


def listing(ctx: MasterContext, q: WorkspaceQuery) -> WorkspacePage:
    """One page of workspaces."""
    W = models.Workspace
    key, descending, limit = sort_key(SORTS, q.sort_by), is_descending(q.order_by), page_limit(q.limit)
    stmt = select(W)
    if q.name:
        stmt = stmt.where(W.name_key == name_key(q.name))
    if q.name_case_sensitive:
        stmt = stmt.where(W.name == q.name_case_sensitive)
    if q.archived is not None:
        stmt = stmt.where(W.archived.is_(q.archived))
    if q.pinned is not None:
        pinned = W.id.in_(select(models.WorkspacePin.workspace_id).where(models.WorkspacePin.user_id == q.viewer))
        stmt = stmt.where(pinned if q.pinned else ~pinned)
    if q.usernames:
        stmt = stmt.where(W.owner_id.in_(select(models.User.id).where(models.User.username.in_(q.usernames))))
    if q.user_ids:
        stmt = stmt.where(W.owner_id.in_(q.user_ids))
    with ctx.db.read_session() as s:
        total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
        order = (key.desc(), W.id.desc()) if descending else (key.asc(), W.id.asc())
        rows = list(s.scalars(stmt.order_by(*order).offset(q.offset).limit(limit)))
        return WorkspacePage(shown(s, rows, q.viewer), total, limit)


def describe(ctx: MasterContext, workspace_id: int, viewer: int = 0) -> Workspace:
    with ctx.db.read_session() as s:
        return shown(s, [get(s, workspace_id)], viewer)[0]
