"""Determined's v1Project and the answers of the project routes: a workspace's list, create, get, patch,
archive, unarchive, move, notes and delete."""

from __future__ import annotations

from pedl.master.wire.base import Pagination, WireModel
from pedl.master.wire.workspace import WorkspaceState


class Note(WireModel):
    """v1Note: one of a project's notes."""

    name: str
    contents: str


class Project(WireModel):
    """v1Project (every key its binding requires). `archived` is its own flag or its workspace's;
    `lastExperimentStartedAt` is null for a project without experiments."""

    id: int
    name: str
    workspaceId: int
    workspaceName: str
    description: str
    key: str
    archived: bool
    immutable: bool
    errorMessage: str
    notes: list[Note]
    numExperiments: int
    numActiveExperiments: int
    numRuns: int
    lastExperimentStartedAt: str | None
    state: WorkspaceState
    userId: int
    username: str


class GetWorkspaceProjectsResponse(WireModel):
    projects: list[Project]
    pagination: Pagination


class PostProjectResponse(WireModel):
    project: Project


class GetProjectResponse(WireModel):
    project: Project


class PatchProjectResponse(WireModel):
    project: Project


class ArchiveProjectResponse(WireModel):
    """Empty."""


class UnarchiveProjectResponse(WireModel):
    """Empty."""


class MoveProjectResponse(WireModel):
    """Empty."""


class AddProjectNoteResponse(WireModel):
    """The project's notes, the new one last."""

    notes: list[Note]


class PutProjectNotesResponse(WireModel):
    notes: list[Note]


class DeleteProjectResponse(WireModel):
    """`completed` is false while its experiments are being deleted (det then polls until the project is
    not found)."""

    completed: bool
