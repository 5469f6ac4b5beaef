"""Versions of registered models: a COMPLETED checkpoint registered as version 1, 2, 3... of a model
(the next number is one past the highest), listed, read, edited and deleted. The model's owner or an
admin changes them. Checkpoint garbage collection keeps every registered checkpoint
(`registered_in_experiment`); deleting the last version of one hands it back to its experiment's policy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints import service as checkpoints
from pedl.master.db import models
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle.states import DELETING_EXPERIMENT, CheckpointState
from pedl.master.model_registry import to_wire
from pedl.master.model_registry.service import (
    NAME_MAX,
    PAGE_MAX,
    check_labels,
    check_metadata,
    check_text,
    find,
    view,
)
from pedl.master.wire.model import Model, ModelVersion

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

SORTS = {
    "SORT_BY_UNSPECIFIED": lambda: models.ModelVersion.version,
    "SORT_BY_VERSION": lambda: models.ModelVersion.version,
    "SORT_BY_CREATION_TIME": lambda: models.ModelVersion.created_at,
}


@dataclass(frozen=True)
class VersionPage:
    """One page of a model's versions as the API sends them, the model, and how many versions it has."""

    model: Model
    items: list[ModelVersion]
    total: int


def registered_in_experiment(s: Session, experiment_id: int) -> set[str]:
    """The uuids of the experiment's checkpoints that are a version of some model."""
    return set(
        s.scalars(
            select(models.ModelVersion.checkpoint_uuid)
            .distinct()
            .join(models.Checkpoint, models.Checkpoint.uuid == models.ModelVersion.checkpoint_uuid)
            .where(models.Checkpoint.experiment_id == experiment_id)
        )
    )


def is_registered(s: Session, uuid: str) -> bool:
    return (
        s.scalar(select(models.ModelVersion.id).where(models.ModelVersion.checkpoint_uuid == uuid).limit(1)) is not None
    )


def _views(s: Session, rows: list[models.ModelVersion], model: Model) -> list[ModelVersion]:
    """Each version with its checkpoint (trial, experiment, validation), in a handful of queries."""
    if not rows:
        return []
    ckpts = list(
        s.scalars(select(models.Checkpoint).where(models.Checkpoint.uuid.in_({r.checkpoint_uuid for r in rows})))
    )
    shown = {c.uuid: c for c in checkpoints.shown(s, ckpts)}
    names = dict(
        s.execute(
            select(models.User.id, models.User.username).where(models.User.id.in_({r.owner_id for r in rows}))
        ).all()
    )
    return [to_wire.version(r, model, names.get(r.owner_id, ""), shown[r.checkpoint_uuid]) for r in rows]


def find_version(s: Session, model: models.RegisteredModel, number: int) -> models.ModelVersion:
    row = s.scalar(
        select(models.ModelVersion).where(
            models.ModelVersion.model_id == model.id, models.ModelVersion.version == number
        )
    )
    if row is None:
        raise NotFound(f"model {model.name!r} has no version {number}")
    return row


def _registrable(s: Session, uuid: str) -> models.Checkpoint:
    ckpt = s.get(models.Checkpoint, uuid) if uuid and len(uuid) <= 64 else None
    if ckpt is None:
        raise InvalidArgument.at("checkpointUuid", f"no checkpoint {uuid!r}")
    # locked (PostgreSQL) so that a deletion of the experiment, or a hold of this checkpoint before its files
    # are deleted (checkpoint_gc_holds.hold locks it too), committed meanwhile is seen here
    exp = s.get(models.Experiment, ckpt.experiment_id, with_for_update=True) if ckpt.experiment_id else None
    s.refresh(ckpt)
    if ckpt.state == CheckpointState.DELETED:
        raise InvalidArgument.at(
            "checkpointUuid",
            f"checkpoint {uuid} was deleted (STATE_DELETED): its files are gone, so it cannot be a model version",
        )
    if ckpt.state != CheckpointState.COMPLETED:
        raise InvalidArgument.at(
            "checkpointUuid", f"checkpoint {uuid} is {ckpt.state}: only a COMPLETED checkpoint can be a model version"
        )
    if exp is not None and exp.state in DELETING_EXPERIMENT:
        raise InvalidArgument.at(
            "checkpointUuid", f"checkpoint {uuid} belongs to experiment {exp.id}, which is being deleted"
        )
    return ckpt


def _check_name(name: str | None) -> None:
    if name is not None and len(name) > NAME_MAX:
        raise InvalidArgument.at("name", f"at most {NAME_MAX} characters")


def register(
    ctx: MasterContext,
    who: Caller,
    identifier: str,
    *,
    checkpoint_uuid: str,
    model_name: str | None = None,
    name: str | None = None,
    comment: str | None = None,
    notes: str | None = None,
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
) -> ModelVersion:
    _check_name(name)
    for where, value in (("comment", comment), ("notes", notes)):
        check_text(where, value or "")
    kept = check_labels(labels or [])
    meta = check_metadata(dict(metadata or {}))
    now = ctx.clock.now()
    with ctx.db.session() as s:
        model = find(s, identifier)
        user = require_owner(who, model.owner_id, f"register a version of model {model.name!r}")
        if model_name not in (None, "", model.name, str(model.id)):
            raise InvalidArgument.at("modelName", f"{model_name!r} is not the model of the path ({model.name!r})")
        if model.archived:
            raise Conflict(f"model {model.name!r} is archived: unarchive it to register versions")
        ckpt = _registrable(s, checkpoint_uuid)
        s.refresh(model, with_for_update=True)  # PostgreSQL: one registration of this model at a time
        number = (
            s.scalar(select(func.max(models.ModelVersion.version)).where(models.ModelVersion.model_id == model.id)) or 0
        ) + 1
        row = models.ModelVersion(
            model_id=model.id,
            version=number,
            checkpoint_uuid=ckpt.uuid,
            name=name or "",
            comment=comment or "",
            notes=notes or "",
            meta=meta,
            labels=kept,
            owner_id=user.id,
            created_at=now,
            updated_at=now,
        )
        s.add(row)
        model.updated_at = now
        s.flush()
        return _views(s, [row], view(s, model))[0]


def describe(ctx: MasterContext, identifier: str, number: int) -> ModelVersion:
    with ctx.db.read_session() as s:
        model = find(s, identifier)
        return _views(s, [find_version(s, model, number)], view(s, model))[0]


def listing(
    ctx: MasterContext,
    identifier: str,
    *,
    offset: int = 0,
    limit: int = 0,
    sort_by: str = "SORT_BY_UNSPECIFIED",
    descending: bool = False,
) -> VersionPage:
    """One page of the model's versions (at most PAGE_MAX), and how many it has."""
    if sort_by not in SORTS:
        raise InvalidArgument.at("sortBy", f"{sort_by!r} is not one of {', '.join(sorted(SORTS))}")
    with ctx.db.read_session() as s:
        model = view(s, find(s, identifier))
        key, tie = SORTS[sort_by](), models.ModelVersion.version
        order = (key.desc(), tie.desc()) if descending else (key.asc(), tie.asc())
        rows = list(
            s.scalars(
                select(models.ModelVersion)
                .where(models.ModelVersion.model_id == model.id)
                .order_by(*order)
                .offset(offset)
                .limit(limit if 0 < limit <= PAGE_MAX else PAGE_MAX)
            )
        )
        return VersionPage(model, _views(s, rows, model), model.numVersions)


def patch(
    ctx: MasterContext,
    who: Caller,
    identifier: str,
    number: int,
    *,
    name: str | None = None,
    comment: str | None = None,
    notes: str | None = None,
    metadata: dict[str, Any] | None = None,
    labels: list[str] | None = None,
    checkpoint_uuid: str | None = None,
) -> ModelVersion:
    """Change what is given (None: unchanged). The checkpoint of a version never changes: register
    another version instead."""
    _check_name(name)
    for where, value in (("comment", comment), ("notes", notes)):
        if value is not None:
            check_text(where, value)
    kept = check_labels(labels) if labels is not None else None
    meta = check_metadata(dict(metadata)) if metadata is not None else None
    with ctx.db.session() as s:
        model = find(s, identifier)
        require_owner(who, model.owner_id, f"change versions of model {model.name!r}")
        row = find_version(s, model, number)
        if checkpoint_uuid is not None and checkpoint_uuid != row.checkpoint_uuid:
            raise InvalidArgument.at(
                "checkpoint.uuid", "a version's checkpoint cannot change; register a new version instead"
            )
        for attr, value in (("name", name), ("comment", comment), ("notes", notes), ("meta", meta), ("labels", kept)):
            if value is not None:
                setattr(row, attr, value)
        row.updated_at = model.updated_at = ctx.clock.now()
        s.flush()
        return _views(s, [row], view(s, model))[0]


def delete(ctx: MasterContext, who: Caller, identifier: str, number: int) -> None:
    """Delete a version; its checkpoint, if no other version holds it, falls back under its
    experiment's checkpoint policy (a collection is asked for). The trials that reported using the
    version keep their link to its checkpoint (the database clears the link's model_id and version)."""
    with ctx.db.session() as s:
        model = find(s, identifier)
        require_owner(who, model.owner_id, f"delete versions of model {model.name!r}")
        row = find_version(s, model, number)
        uuid = row.checkpoint_uuid
        s.delete(row)
        model.updated_at = ctx.clock.now()
        s.flush()
        still_held = is_registered(s, uuid)
        experiment_id = s.scalar(select(models.Checkpoint.experiment_id).where(models.Checkpoint.uuid == uuid))
    if not still_held and experiment_id is not None:
        ctx.controller.want_checkpoint_gc(experiment_id)
