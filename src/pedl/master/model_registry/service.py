"""The model registry's models (Determined's): create, find by name or id, list with det's filters and
sorts, edit, move to another workspace, archive, delete. Any user reads; the owner (its creator) or an
admin changes a model. A model is in workspace 1 unless a request names another. Versions are in
versions.py."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, Select, and_, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.identity.authz import require_owner, require_user
from pedl.master.model_registry import to_wire
from pedl.master.wire.model import Model
from pedl.master.workspaces import workspaces

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

NAME_MAX = 255  # the column's length
TEXT_MAX = 65_536
LABEL_MAX = 255
LABELS_MAX = 100
METADATA_MAX = 64 * 1024  # bytes of JSON: a page of models stays a few MB
PAGE_MAX = 100  # a larger (or no) limit answers this many; det and the SDK follow `endIndex`

SORTS = {
    "SORT_BY_UNSPECIFIED": lambda: models.RegisteredModel.id,
    "SORT_BY_NAME": lambda: models.RegisteredModel.name,
    "SORT_BY_DESCRIPTION": lambda: models.RegisteredModel.description,
    "SORT_BY_CREATION_TIME": lambda: models.RegisteredModel.created_at,
    "SORT_BY_LAST_UPDATED_TIME": lambda: models.RegisteredModel.updated_at,
    "SORT_BY_NUM_VERSIONS": lambda: _version_count(),
    "SORT_BY_WORKSPACE": lambda: models.RegisteredModel.workspace_id,
}


@dataclass(frozen=True)
class ModelPage:
    """One page of models as the API sends them, and how many match."""

    items: list[Model]
    total: int


@dataclass(frozen=True)
class ModelQuery:
    offset: int = 0
    limit: int = 0
    sort_by: str = "SORT_BY_UNSPECIFIED"
    descending: bool = False
    name: str = ""
    description: str = ""
    model_id: int | None = None
    labels: list[str] = field(default_factory=list)
    archived: bool | None = None
    user_ids: list[int] = field(default_factory=list)
    usernames: list[str] = field(default_factory=list)
    workspace_ids: list[int] = field(default_factory=list)
    workspace_names: list[str] = field(default_factory=list)


# -- checking what a request says -------------------------------------------------------------------


def check_name(name: str, where: str = "name") -> str:
    """A model's name is how det addresses it in a URL path: no slash, not only digits (that is an
    id), no dot segment, no control character, no space at either end."""
    if not name or not name.strip():
        raise InvalidArgument.at(where, "a model name must not be empty")
    if len(name) > NAME_MAX:
        raise InvalidArgument.at(where, f"a model name is at most {NAME_MAX} characters")
    if "/" in name or name in (".", ".."):
        raise InvalidArgument.at(where, f"{name!r}: a model name cannot contain '/' or be '.' or '..'")
    if name.isdigit():
        raise InvalidArgument.at(where, f"{name!r}: a model name cannot be only digits (that is read as a model id)")
    if name != name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise InvalidArgument.at(where, f"{name!r}: a model name has no control characters and no space at either end")
    return name


def check_text(where: str, value: str) -> str:
    if len(value) > TEXT_MAX:
        raise InvalidArgument.at(where, f"at most {TEXT_MAX} characters")
    return value


def check_labels(labels: Iterable[str], where: str = "labels") -> list[str]:
    labels = list(labels)
    if len(labels) > LABELS_MAX:
        raise InvalidArgument.at(where, f"at most {LABELS_MAX} labels")
    for i, label in enumerate(labels):
        if not label.strip() or len(label) > LABEL_MAX or any(ord(c) < 32 for c in label):
            raise InvalidArgument.at(f"{where}[{i}]", f"a label is 1 to {LABEL_MAX} characters on one line")
    return list(dict.fromkeys(labels))


def check_metadata(metadata: dict[str, Any], where: str = "metadata") -> dict[str, Any]:
    if len(json.dumps(metadata, separators=(",", ":"))) > METADATA_MAX:
        raise InvalidArgument.at(where, f"at most {METADATA_MAX // 1024} KiB of JSON")
    return metadata


def workspace_of(s: Session, workspace_id: int | None, workspace_name: str | None) -> int:
    """The workspace a request names (by id or name, case aside); none named: the default one. It must
    exist and not be archived."""
    if not workspace_id and not workspace_name:
        return workspaces.DEFAULT_ID
    if workspace_name:
        ws = workspaces.by_name(s, workspace_name)
        if ws is None:
            raise InvalidArgument.at("workspaceName", f"no workspace named {workspace_name!r}")
        if workspace_id and workspace_id != ws.id:
            raise InvalidArgument.at("workspaceId", f"{workspace_id} is not the id of workspace {workspace_name!r}")
        where = "workspaceName"
    else:
        ws = s.get(models.Workspace, workspace_id)
        if ws is None:
            raise InvalidArgument.at("workspaceId", f"no workspace {workspace_id}")
        where = "workspaceId"
    if ws.archived:
        raise InvalidArgument.at(where, f"workspace {ws.name!r} is archived")
    return ws.id


# -- reading (in a session) -------------------------------------------------------------------------


def find(s: Session, identifier: str) -> models.RegisteredModel:
    """The model named `identifier`, or with that id when it is only digits (names never are)."""
    if identifier.isascii() and identifier.isdigit():
        row = s.get(models.RegisteredModel, int(identifier)) if len(identifier) <= 18 else None
    else:
        row = s.scalar(select(models.RegisteredModel).where(models.RegisteredModel.name == identifier))
    if row is None:
        raise NotFound(f"model {identifier!r} not found")
    return row


def _version_count() -> Any:
    return (
        select(func.count())
        .where(models.ModelVersion.model_id == models.RegisteredModel.id)
        .correlate(models.RegisteredModel)
        .scalar_subquery()
    )


def views(s: Session, rows: list[models.RegisteredModel]) -> list[Model]:
    """Each model with its owner's name, labels and version count, in three queries."""
    if not rows:
        return []
    ids = [m.id for m in rows]
    names = dict(
        s.execute(
            select(models.User.id, models.User.username).where(models.User.id.in_({m.owner_id for m in rows}))
        ).all()
    )
    labels: dict[int, list[str]] = {}
    for model_id, label in s.execute(
        select(models.ModelLabel.model_id, models.ModelLabel.label)
        .where(models.ModelLabel.model_id.in_(ids))
        .order_by(models.ModelLabel.model_id, models.ModelLabel.position)
    ):
        labels.setdefault(model_id, []).append(label)
    counts = dict(
        s.execute(
            select(models.ModelVersion.model_id, func.count())
            .where(models.ModelVersion.model_id.in_(ids))
            .group_by(models.ModelVersion.model_id)
        ).all()
    )
    return [to_wire.model(m, names.get(m.owner_id, ""), labels.get(m.id, []), int(counts.get(m.id, 0))) for m in rows]


def view(s: Session, row: models.RegisteredModel) -> Model:
    return views(s, [row])[0]


def _filters(q: ModelQuery) -> list[ColumnElement[bool]]:
    M = models.RegisteredModel
    where: list[ColumnElement[bool]] = []
    if q.name:
        where.append(func.lower(M.name).contains(q.name.lower(), autoescape=True))
    if q.description:
        where.append(func.lower(M.description).contains(q.description.lower(), autoescape=True))
    if q.model_id is not None:
        where.append(M.id == q.model_id)
    if q.archived is not None:
        where.append(M.archived.is_(q.archived))
    if q.user_ids:
        where.append(M.owner_id.in_(q.user_ids))
    if q.usernames:
        where.append(M.owner_id.in_(select(models.User.id).where(models.User.username.in_(q.usernames))))
    if q.workspace_ids:
        where.append(M.workspace_id.in_(q.workspace_ids))
    if q.workspace_names:
        where.append(
            M.workspace_id.in_(
                select(models.Workspace.id).where(
                    models.Workspace.name_key.in_({workspaces.name_key(n) for n in q.workspace_names})
                )
            )
        )
    for label in dict.fromkeys(q.labels):  # every label asked for
        where.append(
            select(models.ModelLabel.model_id)
            .where(and_(models.ModelLabel.model_id == M.id, models.ModelLabel.label == label))
            .exists()
        )
    return where


def page(s: Session, q: ModelQuery) -> ModelPage:
    if q.sort_by not in SORTS:
        raise InvalidArgument.at("sortBy", f"{q.sort_by!r} is not one of {', '.join(sorted(SORTS))}")
    for where, value in (("name", q.name), ("description", q.description)):
        if len(value) > NAME_MAX:
            raise InvalidArgument.at(where, f"at most {NAME_MAX} characters")
    stmt: Select = select(models.RegisteredModel).where(*_filters(q))
    total = s.scalar(select(func.count()).select_from(stmt.subquery())) or 0
    key, tie = SORTS[q.sort_by](), models.RegisteredModel.id
    order = (key.desc(), tie.desc()) if q.descending else (key.asc(), tie.asc())
    limit = q.limit if 0 < q.limit <= PAGE_MAX else PAGE_MAX
    rows = list(s.scalars(stmt.order_by(*order).offset(q.offset).limit(limit)))
    return ModelPage(views(s, rows), total)


# -- changing (in a session) ------------------------------------------------------------------------


def _set_labels(s: Session, model: models.RegisteredModel, labels: list[str]) -> None:
    s.execute(table_of(models.ModelLabel).delete().where(models.ModelLabel.model_id == model.id))
    s.add_all(models.ModelLabel(model_id=model.id, label=label, position=i) for i, label in enumerate(labels))


def _name_free(s: Session, name: str, where: str = "name") -> None:
    if s.scalar(select(models.RegisteredModel.id).where(models.RegisteredModel.name == name)) is not None:
        raise Conflict(
            f"{where}: a model named {name!r} already exists", fields=[{"field": where, "message": "already exists"}]
        )


def _flush_unique(s: Session, name: str) -> None:
    """Flush; a model of the same name committed meanwhile (another request) is a Conflict, not a 500."""
    try:
        s.flush()
    except IntegrityError:
        raise Conflict(
            f"name: a model named {name!r} already exists", fields=[{"field": "name", "message": "already exists"}]
        ) from None


# -- what the routers call (each opens its own session) ---------------------------------------------


def create(
    ctx: MasterContext,
    who: Caller,
    *,
    name: str,
    description: str | None = None,
    notes: str | None = None,
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
    workspace_id: int | None = None,
    workspace_name: str | None = None,
) -> Model:
    user = require_user(who, "create a model")
    check_name(name)
    kept = check_labels(labels or [])
    meta = check_metadata(dict(metadata or {}))
    now = ctx.clock.now()
    with ctx.db.session() as s:
        ws = workspace_of(s, workspace_id, workspace_name)
        _name_free(s, name)
        model = models.RegisteredModel(
            name=name,
            description=check_text("description", description or ""),
            notes=check_text("notes", notes or ""),
            meta=meta,
            owner_id=user.id,
            workspace_id=ws,
            archived=False,
            created_at=now,
            updated_at=now,
        )
        s.add(model)
        _flush_unique(s, name)
        _set_labels(s, model, kept)
        return view(s, model)


def describe(ctx: MasterContext, identifier: str) -> Model:
    with ctx.db.read_session() as s:
        return view(s, find(s, identifier))


def listing(ctx: MasterContext, q: ModelQuery) -> ModelPage:
    with ctx.db.read_session() as s:
        return page(s, q)


def patch(
    ctx: MasterContext,
    who: Caller,
    identifier: str,
    *,
    name: str | None = None,
    description: str | None = None,
    notes: str | None = None,
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
    workspace_id: int | None = None,
    workspace_name: str | None = None,
) -> Model:
    """Change what is given (None: unchanged); metadata and labels are replaced whole, as the SDK's
    add_metadata and set_labels send them."""
    if name is not None:
        check_name(name)
    kept = check_labels(labels) if labels is not None else None
    meta = check_metadata(dict(metadata)) if metadata is not None else None
    for where, value in (("description", description), ("notes", notes)):
        if value is not None:
            check_text(where, value)
    with ctx.db.session() as s:
        model = find(s, identifier)
        require_owner(who, model.owner_id, f"change model {model.name!r}")
        ws = workspace_of(s, workspace_id, workspace_name) if workspace_id or workspace_name else None
        if name is not None and name != model.name:
            _name_free(s, name)
            model.name = name
        if description is not None:
            model.description = description
        if notes is not None:
            model.notes = notes
        if meta is not None:
            model.meta = meta
        if ws is not None:
            model.workspace_id = ws
        if kept is not None:
            _set_labels(s, model, kept)
        model.updated_at = ctx.clock.now()
        _flush_unique(s, model.name)
        return view(s, model)


def set_archived(ctx: MasterContext, who: Caller, identifier: str, archived: bool) -> None:
    with ctx.db.session() as s:
        model = find(s, identifier)
        require_owner(who, model.owner_id, f"{'archive' if archived else 'unarchive'} model {model.name!r}")
        if model.archived != archived:
            model.archived = archived
            model.updated_at = ctx.clock.now()


def delete(ctx: MasterContext, who: Caller, identifier: str) -> None:
    """Delete the model and its versions; their checkpoints fall back under their experiments'
    checkpoint policies (a collection is asked for each experiment)."""
    with ctx.db.session() as s:
        model = find(s, identifier)
        require_owner(who, model.owner_id, f"delete model {model.name!r}")
        experiments = {
            exp_id
            for exp_id in s.scalars(
                select(models.Checkpoint.experiment_id)
                .join(models.ModelVersion, models.ModelVersion.checkpoint_uuid == models.Checkpoint.uuid)
                .where(models.ModelVersion.model_id == model.id, models.Checkpoint.experiment_id.is_not(None))
            )
            if exp_id is not None
        }
        s.execute(table_of(models.ModelVersion).delete().where(models.ModelVersion.model_id == model.id))
        s.execute(table_of(models.ModelLabel).delete().where(models.ModelLabel.model_id == model.id))
        s.delete(model)
    for experiment_id in sorted(experiments):
        ctx.controller.want_checkpoint_gc(experiment_id)


def label_counts(ctx: MasterContext, workspace_id: int | None = None, limit: int = 1000) -> list[str]:
    """The labels used on models, the most used first (then by name); at most `limit` of them."""
    with ctx.db.read_session() as s:
        uses = func.count().label("uses")
        stmt = select(models.ModelLabel.label, uses).group_by(models.ModelLabel.label)
        if workspace_id:
            stmt = stmt.join(models.RegisteredModel, models.RegisteredModel.id == models.ModelLabel.model_id).where(
                models.RegisteredModel.workspace_id == workspace_id
            )
        counted = stmt.subquery()
        return list(s.scalars(select(counted.c.label).order_by(counted.c.uses.desc(), counted.c.label).limit(limit)))
