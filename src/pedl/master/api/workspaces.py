"""Workspaces: list (with Determined's name lookups), create, get, edit (name, checkpoint storage),
archive, pin and delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, pagination, parse
from pedl.master.api.openapi import accepts
from pedl.master.workspaces import WorkspaceQuery, workspace_edits
from pedl.master.workspaces import workspaces as workspaces_service

router = APIRouter(prefix="/api/v1/workspaces")


class CreateWorkspaceBody(Body):
    name: str
    checkpointStorageConfig: Any = None  # a checkpoint_storage section; {} or null: none
    # what det may send and pedl does not keep per workspace: refused when set, never dropped
    agentUserGroup: Any = None
    defaultComputePool: Any = None
    defaultAuxPool: Any = None
    clusterNamespaceMeta: Any = None
    clusterQuotaPairs: Any = None


class PatchWorkspaceBody(Body):
    name: str | None = None
    checkpointStorageConfig: Any = None  # {}: reset; null or left out: unchanged
    agentUserGroup: Any = None
    defaultComputePool: Any = None
    defaultAuxPool: Any = None
    defaultComputeResourcePool: Any = None
    defaultAuxResourcePool: Any = None
    clusterNamespaceMeta: Any = None


UNSUPPORTED = (
    "agentUserGroup",
    "defaultComputePool",
    "defaultAuxPool",
    "defaultComputeResourcePool",
    "defaultAuxResourcePool",
    "clusterNamespaceMeta",
    "clusterQuotaPairs",
)


def refuse_unsupported(req: Body) -> None:
    for key in UNSUPPORTED:
        if getattr(req, key, None) not in (None, {}, ""):
            raise InvalidArgument.at(key, "pedl does not keep this per workspace; leave it unset")


def workspace(shown: workspaces_service.Shown) -> dict[str, Any]:
    """Determined's v1Workspace (every key its binding requires)."""
    w = shown.workspace
    return {
        "id": w.id,
        "name": w.name,
        "archived": w.archived,
        "immutable": w.immutable,
        "errorMessage": "",
        "numExperiments": shown.num_experiments,
        "numProjects": shown.num_projects,
        "pinned": shown.pinned,
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "userId": w.owner_id or 0,
        "username": shown.username,
        "checkpointStorageConfig": w.checkpoint_storage or None,
    }


@router.get("")
def list_workspaces(
    request: Request,
    who: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    name: str | None = None,
    nameCaseSensitive: str | None = None,
    archived: bool | None = None,
    pinned: bool | None = None,
    users: list[str] = Query(default_factory=list),
    userIds: list[int] = Query(default_factory=list),
    sortBy: str | None = None,
    orderBy: str | None = None,
) -> dict:
    query = WorkspaceQuery(
        offset=offset,
        limit=limit,
        name=name,
        name_case_sensitive=nameCaseSensitive,
        archived=archived,
        pinned=pinned,
        usernames=users,
        user_ids=userIds,
        sort_by=sortBy,
        order_by=orderBy,
        viewer=who.user.id,
    )
    rows, total, page = workspaces_service.listing(ctx_of(request), query)
    return {"workspaces": [workspace(w) for w in rows], "pagination": pagination(offset, page, total, len(rows))}


@router.post("")
@accepts(CreateWorkspaceBody, errors=(409,))
def create(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateWorkspaceBody, body)
    refuse_unsupported(req)
    storage = req.checkpointStorageConfig
    shown = workspaces_service.create(ctx_of(request), who, req.name, None if storage in (None, {}) else storage)
    # det iterates namespaceBindings after a create (a Kubernetes namespace per cluster; pedl has none)
    return {"workspace": workspace(shown), "namespaceBindings": {}}


@router.get("/{workspace_id}")
def get_workspace(workspace_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    return {"workspace": workspace(workspaces_service.describe(ctx_of(request), workspace_id, who.user.id))}


@router.patch("/{workspace_id}")
@accepts(PatchWorkspaceBody, errors=(409,))
def patch(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    """Rename it, set its checkpoint storage or ({}) reset it: its creator or an admin."""
    req = parse(PatchWorkspaceBody, body)
    refuse_unsupported(req)
    storage = req.checkpointStorageConfig
    shown = workspace_edits.patch(
        ctx_of(request),
        who,
        workspace_id,
        name=req.name,
        storage=... if storage is None else (None if storage == {} else storage),
    )
    return {"workspace": workspace(shown)}


@router.post("/{workspace_id}/archive")
def archive(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    workspace_edits.set_archived(ctx_of(request), who, workspace_id, True)
    return {}


@router.post("/{workspace_id}/unarchive")
def unarchive(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    workspace_edits.set_archived(ctx_of(request), who, workspace_id, False)
    return {}


@router.post("/{workspace_id}/pin")
def pin(workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)) -> dict:
    workspace_edits.pin(ctx_of(request), who, workspace_id, True)
    return {}


@router.post("/{workspace_id}/unpin")
def unpin(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    workspace_edits.pin(ctx_of(request), who, workspace_id, False)
    return {}


@router.delete("/{workspace_id}")
def delete_workspace(workspace_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    """Its projects, templates and pins go now; its experiments (all ended) are deleted by the master's
    worker: `completed` is false while any are (det then polls until the workspace is not found)."""
    completed = workspace_edits.remove(
        ctx_of(request), who, workspace_id, request.app.state.experiment_deletion.request
    )
    return {"completed": completed}
