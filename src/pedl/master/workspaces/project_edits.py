"""What a project's creator (or an admin) changes, as in Determined without RBAC: its name, description
and key (PATCH), notes, archiving it, moving it to another workspace, and deleting it with its
experiments. Uncategorized (immutable) is refused all of these, naming why; an archived project or
one in an archived workspace is not edited or moved."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments import deletion as experiment_deletion
from pedl.master.identity.authz import require_owner
from pedl.master.wire.project import Note, Project
from pedl.master.workspaces import to_wire, workspaces
from pedl.master.workspaces.projects import _taken, checked_key, get, in_workspace, shown
from pedl.master.workspaces.workspaces import checked_name, name_key

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_NOTES = 100
MAX_NOTE = 65_536  # characters of a note's contents
MAX_DELETED_EXPERIMENTS = 1000  # bounded work per request: a larger project is emptied first


def _editable(
    s: Session, who: Caller, project_id: int, action: str, *, immutable_first: bool = False
) -> models.Project:
    """The project, when the caller created it or is an admin (403 otherwise) and it is not the default
    (400). Determined answers an edit of the default project with the 400 whoever asks, and its archive,
    move or deletion by a non-admin with the 403: `immutable_first` is the former order."""
    project = get(s, project_id)

    def refuse_default() -> None:
        if project.immutable:
            raise InvalidArgument(f"project {project.name!r} is the default project (immutable): it cannot {action}")

    if immutable_first:
        refuse_default()
    require_owner(who, project.owner_id or 0, f"change project {project_id}")
    refuse_default()
    return project


def _workspace_open(s: Session, project: models.Project, action: str) -> models.Workspace:
    ws = workspaces.get(s, project.workspace_id)
    if ws.archived:
        raise InvalidArgument(
            f"project {project.name!r} is in workspace {ws.name!r}, which is archived: it cannot "
            f"{action} until the workspace is unarchived"
        )
    return ws


def patch(
    ctx: MasterContext, who: Caller, project_id: int, *, name: str | None, description: str | None, key: str | None
) -> Project:
    if name is not None:
        checked_name(name, "name")
    if description is not None and len(description) > MAX_NOTE:
        raise InvalidArgument.at("description", f"at most {MAX_NOTE} characters")
    try:
        with ctx.db.session() as s:
            project = _editable(s, who, project_id, "be edited", immutable_first=True)
            if project.archived:
                raise InvalidArgument(f"project {project.name!r} is archived: unarchive it to edit it")
            ws = _workspace_open(s, project, "be edited")
            if name is not None and name != project.name:
                other = in_workspace(s, ws.id, name)
                if other is not None and other.id != project.id:
                    raise _taken(name, ws.name)
                project.name, project.name_key = name, name_key(name)
            if description is not None:
                project.description = description
            if key:
                project.key = checked_key(key, project.name)
            s.flush()
            return shown(s, [project])[0]
    except IntegrityError:
        raise _taken(name or "", str(project_id)) from None


def set_archived(ctx: MasterContext, who: Caller, project_id: int, archived: bool) -> None:
    with ctx.db.session() as s:
        project = _editable(s, who, project_id, "be archived" if archived else "be unarchived")
        _workspace_open(s, project, "be archived" if archived else "be unarchived")
        project.archived = archived  # a repeat changes nothing


def move(ctx: MasterContext, who: Caller, project_id: int, workspace_id: int) -> None:
    """Into another workspace that takes projects (not the default, not archived), keeping its name unique."""
    field = "destinationWorkspaceId"
    with ctx.db.session() as s:
        project = _editable(s, who, project_id, "be moved")
        if project.archived:
            raise InvalidArgument(f"project {project.name!r} is archived and cannot be moved; unarchive it first")
        _workspace_open(s, project, "be moved")
        dest = s.get(models.Workspace, workspace_id)
        if dest is None:
            raise NotFound(
                f"{field}: workspace {workspace_id} not found", fields=[{"field": field, "message": "not found"}]
            )
        if dest.immutable or dest.archived:
            why = "the default workspace (immutable)" if dest.immutable else "archived"
            raise InvalidArgument.at(field, f"workspace {dest.name!r} is {why} and takes no projects")
        if dest.id == project.workspace_id:
            return
        if in_workspace(s, dest.id, project.name) is not None:
            raise _taken(project.name, dest.name)
        project.workspace_id = dest.id


def _notes(notes: list[Any]) -> list[dict[str, str]]:
    if len(notes) > MAX_NOTES:
        raise InvalidArgument.at("notes", f"at most {MAX_NOTES} notes")
    out = []
    for i, note in enumerate(notes):
        if (
            not isinstance(note, dict)
            or not isinstance(note.get("name"), str)
            or not isinstance(note.get("contents"), str)
        ):
            raise InvalidArgument.at(f"notes[{i}]", "a note is {name, contents}, both strings")
        if len(note["name"]) > workspaces.MAX_NAME or len(note["contents"]) > MAX_NOTE:
            raise InvalidArgument.at(
                f"notes[{i}]", f"name at most {workspaces.MAX_NAME} characters, contents at most {MAX_NOTE}"
            )
        out.append({"name": note["name"], "contents": note["contents"]})
    return out


def set_notes(ctx: MasterContext, who: Caller, project_id: int, notes: list[Any], *, append: bool) -> list[Note]:
    """Replace the project's notes, or (append) add one -> the notes now."""
    checked = _notes(notes)
    with ctx.db.session() as s:
        project = get(s, project_id)
        require_owner(who, project.owner_id or 0, f"change project {project_id}")
        now = _notes([*(project.notes or []), *checked]) if append else checked
        project.notes = now
        return to_wire.notes(now)


def remove(ctx: MasterContext, who: Caller, project_id: int, wake: Callable[[int], None]) -> bool:
    """Delete it; its experiments (each must have ended) are marked DELETING, moved to Uncategorized
    meanwhile (experiment_deletion.mark_all) and removed by the master's deletion worker. -> completed:
    True when there were none."""

    def work(s: Session) -> list[int]:
        project = _editable(s, who, project_id, "be deleted")
        exps = list(
            s.scalars(
                select(models.Experiment)
                .where(models.Experiment.project_id == project.id)
                .order_by(models.Experiment.id)
                .limit(MAX_DELETED_EXPERIMENTS + 1)
            )
        )
        if len(exps) > MAX_DELETED_EXPERIMENTS:
            raise InvalidArgument(
                f"project {project.name!r} has more than {MAX_DELETED_EXPERIMENTS} experiments: "
                "delete some of them first"
            )
        marked = experiment_deletion.mark_all(
            s,
            ctx.clock.now(),
            who,
            exps,
            orphan_to=workspaces.DEFAULT_ID,
            why=f"its project {project.name!r} was deleted",
        )
        s.delete(project)
        return marked

    marked = ctx.controller.run(work)
    for experiment_id in marked:
        wake(experiment_id)
    return not marked
