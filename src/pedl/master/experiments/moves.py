"""Moving an experiment into another project (Determined's POST /experiments/{id}/move, `det e move`,
the SDK's move_to_project, `pedl experiment move`): its owner or an admin, into any project that is not
archived, as Determined allows."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.service import get
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle.transitions import record_event

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

FIELD = "destinationProjectId"


def _destination(s: Session, project_id: int) -> tuple[models.Project, models.Workspace]:
    project = s.get(models.Project, project_id)
    if project is None:
        raise NotFound(f"{FIELD}: project {project_id} not found", fields=[{"field": FIELD, "message": "not found"}])
    workspace = s.get(models.Workspace, project.workspace_id)
    if project.archived or workspace is None or workspace.archived:
        what = f"project {project.name!r}" if project.archived else "its workspace"
        raise InvalidArgument.at(FIELD, f"{what} is archived and takes no experiments (project {project_id})")
    return project, workspace


def _where(s: Session, project_id: int) -> str:
    project = s.get(models.Project, project_id)
    workspace = s.get(models.Workspace, project.workspace_id) if project is not None else None
    return f"{workspace.name if workspace else '?'}/{project.name if project else '?'} (project {project_id})"


def move(ctx: MasterContext, who: Caller, experiment_id: int, project_id: int) -> None:
    """Put the experiment in project `project_id`. An archived experiment, or one in an archived project,
    stays where it is (as in Determined). A config that names its workspace and project names the new
    ones, as the config keeps its own copy of the name and labels in step."""

    def change(s: Session) -> None:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"move experiment {experiment_id}")
        project, workspace = _destination(s, project_id)
        if exp.project_id == project.id:
            return
        if exp.archived:
            raise InvalidArgument(f"experiment {experiment_id} is archived and cannot be moved; unarchive it first")
        source = s.get(models.Project, exp.project_id)
        if source is not None and source.archived:
            raise InvalidArgument(
                f"experiment {experiment_id} is in project {source.name!r}, which is archived: "
                "its experiments cannot be moved out of it"
            )
        before = _where(s, exp.project_id)
        exp.project_id = project.id
        if exp.config.get("workspace") or exp.config.get("project"):
            exp.config = {**exp.config, "workspace": workspace.name, "project": project.name}
        record_event(
            s,
            ctx.clock.now(),
            "experiment",
            exp.id,
            f"moved from {before} to {workspace.name}/{project.name} (project {project.id}) by {who.user.username}",
        )

    ctx.controller.run(change)
