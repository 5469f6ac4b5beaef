"""What a workspace's creator (or an admin) changes, as in Determined without RBAC: its name and
checkpoint storage (PATCH), archiving it with its projects, pins, and deleting it with its projects and
experiments. Uncategorized (immutable) is refused all of these, naming why."""

from __future__ import annotations

from types import EllipsisType
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments import deletion as experiment_deletion
from pedl.master.identity.authz import require_owner, require_user
from pedl.master.tasks import service as generic_tasks
from pedl.master.wire.workspace import Workspace
from pedl.master.workspaces.workspace_storage import checked_storage
from pedl.master.workspaces.workspaces import DEFAULT_ID, _taken, by_name, checked_name, get, name_key, shown

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_DELETED_EXPERIMENTS = 1000  # a workspace with more is emptied project by project (bounded work per request)


def _editable(
    s: Session, who: Caller, workspace_id: int, action: str, *, immutable_first: bool = False
) -> models.Workspace:
    """The workspace, when the caller created it or is an admin (403 otherwise) and it is not the default
    (400). Determined answers an edit of the default workspace with the 400 whoever asks, and its archive
    or deletion by a non-admin with the 403: `immutable_first` is the former order."""
    ws = get(s, workspace_id)

    def refuse_default() -> None:
        if ws.immutable:
            raise InvalidArgument(f"workspace {ws.name!r} is the default workspace (immutable): it cannot {action}")

    if immutable_first:
        refuse_default()
    require_owner(who, ws.owner_id or 0, f"change workspace {workspace_id}")
    refuse_default()
    return ws


def patch(
    ctx: MasterContext,
    who: Caller,
    workspace_id: int,
    *,
    name: str | None,
    storage: dict[str, Any] | None | EllipsisType = ...,
) -> Workspace:
    """Rename it and/or set its checkpoint storage (None: reset; ...: unchanged). An archived workspace
    is not edited (as in Determined)."""
    if name is not None:
        checked_name(name, "name")
    stored = storage if storage is None or storage is ... else checked_storage(ctx.config, storage)
    try:
        with ctx.db.session() as s:
            ws = _editable(s, who, workspace_id, "be edited", immutable_first=True)
            if ws.archived:
                raise InvalidArgument(f"workspace {ws.name!r} is archived: unarchive it to edit it")
            if name is not None and name != ws.name:
                other = by_name(s, name)
                if other is not None and other.id != ws.id:
                    raise _taken(name)
                ws.name, ws.name_key = name, name_key(name)
            if stored is not ...:
                ws.checkpoint_storage = stored
            s.flush()
            return shown(s, [ws], who.user.id)[0]
    except IntegrityError:
        raise _taken(name or "") from None


def set_archived(ctx: MasterContext, who: Caller, workspace_id: int, archived: bool) -> None:
    """Archive or unarchive it. Its projects show as archived while it is (workspaces/projects.py), keeping
    their own flag for when it is unarchived."""
    with ctx.db.session() as s:
        ws = _editable(s, who, workspace_id, "be archived" if archived else "be unarchived")
        ws.archived = archived  # a repeat changes nothing


def pin(ctx: MasterContext, who: Caller, workspace_id: int, pinned: bool) -> None:
    """Pin it for the caller (any user who sees it), or unpin it; a repeat changes nothing."""
    user = require_user(who, "pin workspaces")
    with ctx.db.session() as s:
        get(s, workspace_id)
        row = s.get(models.WorkspacePin, (workspace_id, user.id))
        if pinned and row is None:
            s.add(models.WorkspacePin(workspace_id=workspace_id, user_id=user.id))
        elif not pinned and row is not None:
            s.delete(row)


def remove(ctx: MasterContext, who: Caller, workspace_id: int, wake: Any) -> bool:
    """Delete it with its projects, pins, templates and registered models, killing its live commands,
    notebooks, shells and TensorBoards; its experiments (each must have ended) are marked DELETING,
    moved to Uncategorized meanwhile (experiment_deletion.mark_all) and removed by the master's
    deletion worker. -> completed: True when none had to be."""
    released: set[int] = set()

    def work(s: Session) -> list[int]:
        ws = _editable(s, who, workspace_id, "be deleted")
        released.update(_delete_models(s, ws))  # first: their versions would keep its experiments
        project_ids = list(s.scalars(select(models.Project.id).where(models.Project.workspace_id == ws.id)))
        exps = list(
            s.scalars(
                select(models.Experiment)
                .where(models.Experiment.project_id.in_(project_ids))
                .order_by(models.Experiment.id)
                .limit(MAX_DELETED_EXPERIMENTS + 1)
            )
        )
        if len(exps) > MAX_DELETED_EXPERIMENTS:
            raise InvalidArgument(
                f"workspace {ws.name!r} has more than {MAX_DELETED_EXPERIMENTS} experiments: "
                "delete its projects one by one first"
            )
        marked = experiment_deletion.mark_all(
            s, ctx.clock.now(), who, exps, orphan_to=DEFAULT_ID, why=f"its workspace {ws.name!r} was deleted"
        )
        generic_tasks.kill_in_workspace(ctx.controller, s, ws.id, f"its workspace {ws.name!r} was deleted")
        s.execute(delete(models.WorkspacePin).where(models.WorkspacePin.workspace_id == ws.id))
        s.execute(delete(models.Template).where(models.Template.workspace_id == ws.id))
        s.execute(delete(models.Project).where(models.Project.id.in_(project_ids)))
        s.delete(ws)
        return marked

    marked = ctx.controller.run(work)
    for experiment_id in marked:
        wake(experiment_id)
    for experiment_id in sorted(released - set(marked)):
        ctx.controller.want_checkpoint_gc(experiment_id)  # as model_registry/service.delete does
    return not marked


def _delete_models(s: Session, ws: models.Workspace) -> set[int]:
    """Delete the workspace's registered models with their versions and labels (as Determined does with
    the workspace) -> the experiments whose checkpoints the versions held."""
    M = models.RegisteredModel
    ids = list(s.scalars(select(M.id).where(M.workspace_id == ws.id).limit(MAX_DELETED_EXPERIMENTS + 1)))
    if len(ids) > MAX_DELETED_EXPERIMENTS:
        raise InvalidArgument(
            f"workspace {ws.name!r} holds more than {MAX_DELETED_EXPERIMENTS} models: delete some of them first"
        )
    if not ids:
        return set()
    held = {
        exp_id
        for exp_id in s.scalars(
            select(models.Checkpoint.experiment_id)
            .join(models.ModelVersion, models.ModelVersion.checkpoint_uuid == models.Checkpoint.uuid)
            .where(models.ModelVersion.model_id.in_(ids), models.Checkpoint.experiment_id.is_not(None))
        )
        if exp_id is not None
    }
    s.execute(delete(models.ModelVersion).where(models.ModelVersion.model_id.in_(ids)))
    s.execute(delete(models.ModelLabel).where(models.ModelLabel.model_id.in_(ids)))
    s.execute(delete(M).where(M.id.in_(ids)))
    return held
