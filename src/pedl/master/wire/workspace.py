"""Determined's v1Workspace and the answers of the workspace routes: list, create, get, patch, archive,
unarchive, pin, unpin and delete."""

from __future__ import annotations

from typing import Any, Literal

from pedl.master.wire.base import Pagination, WireModel

# workspacev1WorkspaceState, which projects share; pedl deletes at once, so it sends only the first
WorkspaceState = Literal[
    "WORKSPACE_STATE_UNSPECIFIED",
    "WORKSPACE_STATE_DELETING",
    "WORKSPACE_STATE_DELETE_FAILED",
    "WORKSPACE_STATE_DELETED",
]


class Workspace(WireModel):
    """v1Workspace (every key its binding requires). `checkpointStorageConfig` is null for a workspace
    that uses the master's storage; `pinned` is by the caller."""

    id: int
    name: str
    archived: bool
    immutable: bool
    errorMessage: str
    numExperiments: int
    numProjects: int
    pinned: bool
    state: WorkspaceState
    userId: int
    username: str
    checkpointStorageConfig: dict[str, Any] | None


class GetWorkspacesResponse(WireModel):
    workspaces: list[Workspace]
    pagination: Pagination


class PostWorkspaceResponse(WireModel):
    """det iterates namespaceBindings after a create (a Kubernetes namespace per cluster; pedl has none)."""

    workspace: Workspace
    namespaceBindings: dict[str, Any]


class GetWorkspaceResponse(WireModel):
    workspace: Workspace


class PatchWorkspaceResponse(WireModel):
    workspace: Workspace


class ArchiveWorkspaceResponse(WireModel):
    """Empty."""


class UnarchiveWorkspaceResponse(WireModel):
    """Empty."""


class PinWorkspaceResponse(WireModel):
    """Empty."""


class UnpinWorkspaceResponse(WireModel):
    """Empty."""


class DeleteWorkspaceResponse(WireModel):
    """`completed` is false while its experiments are being deleted (det then polls until the workspace
    is not found)."""

    completed: bool
