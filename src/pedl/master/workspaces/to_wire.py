"""Workspace, project and template rows as Determined's v1Workspace, v1Project and v1Template, with what
the services count for them (projects, experiments, runs) and their owners' usernames."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.wire.base import ts
from pedl.master.wire.project import Note, Project
from pedl.master.wire.template import Template
from pedl.master.wire.workspace import Workspace

if TYPE_CHECKING:
    from pedl.master.db import models


def workspace(
    w: models.Workspace, *, username: str, num_projects: int, num_experiments: int, pinned: bool
) -> Workspace:
    """The workspace; `pinned` by whoever asks."""
    return Workspace(
        id=w.id,
        name=w.name,
        archived=w.archived,
        immutable=w.immutable,
        errorMessage="",
        numExperiments=num_experiments,
        numProjects=num_projects,
        pinned=pinned,
        state="WORKSPACE_STATE_UNSPECIFIED",
        userId=w.owner_id or 0,
        username=username,
        checkpointStorageConfig=w.checkpoint_storage or None,
    )


def notes(stored: list | None) -> list[Note]:
    """A project's notes as stored ([{name, contents}], project_edits checks them)."""
    return [Note.model_validate(n) for n in stored or []]


def project(
    p: models.Project,
    *,
    workspace_name: str,
    username: str,
    num_experiments: int,
    num_active_experiments: int,
    num_runs: int,
    last_experiment_started_at: float | None,
    archived: bool,
) -> Project:
    """The project; `archived` is its own flag or its workspace's."""
    return Project(
        id=p.id,
        name=p.name,
        workspaceId=p.workspace_id,
        workspaceName=workspace_name,
        description=p.description,
        key=p.key,
        archived=archived,
        immutable=p.immutable,
        errorMessage="",
        notes=notes(p.notes),
        numExperiments=num_experiments,
        numActiveExperiments=num_active_experiments,
        numRuns=num_runs,
        lastExperimentStartedAt=ts(last_experiment_started_at),
        state="WORKSPACE_STATE_UNSPECIFIED",
        userId=p.owner_id or 0,
        username=username,
    )


def template(t: models.Template, *, username: str) -> Template:
    return Template(name=t.name, config=t.config, workspaceId=t.workspace_id, userId=t.owner_id, username=username)
