"""Workspaces: list (with Determined's name lookups), create, get, edit (name, checkpoint storage),
archive, pin and delete."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.wire.base import Pagination
from pedl.master.wire.workspace import (
    ArchiveWorkspaceResponse,
    DeleteWorkspaceResponse,
    GetWorkspaceResponse,
    GetWorkspacesResponse,
    PatchWorkspaceResponse,
    PinWorkspaceResponse,
    PostWorkspaceResponse,
    UnarchiveWorkspaceResponse,
    UnpinWorkspaceResponse,
)
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


@router.get("", response_model=GetWorkspacesResponse, response_model_exclude_unset=True)
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
) -> GetWorkspacesResponse:
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
    page = workspaces_service.listing(ctx_of(request), query)
    return GetWorkspacesResponse(
        workspaces=page.items, pagination=Pagination.of(offset, page.limit, page.total, len(page.items))
    )


@router.post("", response_model=PostWorkspaceResponse, response_model_exclude_unset=True)
@accepts(CreateWorkspaceBody, errors=(409,))
def create(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> PostWorkspaceResponse:
    req = parse(CreateWorkspaceBody, body)
    refuse_unsupported(req)
    storage = req.checkpointStorageConfig
    shown = workspaces_service.create(ctx_of(request), who, req.name, None if storage in (None, {}) else storage)
    # det iterates namespaceBindings after a create (a Kubernetes namespace per cluster; pedl has none)
    return PostWorkspaceResponse(workspace=shown, namespaceBindings={})


@router.get("/{workspace_id}", response_model=GetWorkspaceResponse, response_model_exclude_unset=True)
def get_workspace(workspace_id: IdPath, request: Request, who: Caller = Depends(caller)) -> GetWorkspaceResponse:
    return GetWorkspaceResponse(workspace=workspaces_service.describe(ctx_of(request), workspace_id, who.user.id))


@router.patch("/{workspace_id}", response_model=PatchWorkspaceResponse, response_model_exclude_unset=True)
@accepts(PatchWorkspaceBody, errors=(409,))
def patch(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PatchWorkspaceResponse:
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
    return PatchWorkspaceResponse(workspace=shown)


@router.post("/{workspace_id}/archive", response_model=ArchiveWorkspaceResponse, response_model_exclude_unset=True)
def archive(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> ArchiveWorkspaceResponse:
    workspace_edits.set_archived(ctx_of(request), who, workspace_id, True)
    return ArchiveWorkspaceResponse()


@router.post("/{workspace_id}/unarchive", response_model=UnarchiveWorkspaceResponse, response_model_exclude_unset=True)
def unarchive(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> UnarchiveWorkspaceResponse:
    workspace_edits.set_archived(ctx_of(request), who, workspace_id, False)
    return UnarchiveWorkspaceResponse()


@router.post("/{workspace_id}/pin", response_model=PinWorkspaceResponse, response_model_exclude_unset=True)
def pin(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> PinWorkspaceResponse:
    workspace_edits.pin(ctx_of(request), who, workspace_id, True)
    return PinWorkspaceResponse()


@router.post("/{workspace_id}/unpin", response_model=UnpinWorkspaceResponse, response_model_exclude_unset=True)
def unpin(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> UnpinWorkspaceResponse:
    workspace_edits.pin(ctx_of(request), who, workspace_id, False)
    return UnpinWorkspaceResponse()


@router.delete("/{workspace_id}", response_model=DeleteWorkspaceResponse, response_model_exclude_unset=True)
def delete_workspace(workspace_id: IdPath, request: Request, who: Caller = Depends(caller)) -> DeleteWorkspaceResponse:
    """Its projects, templates and pins go now; its experiments (all ended) are deleted by the master's
    worker: `completed` is false while any are (det then polls until the workspace is not found)."""
    completed = workspace_edits.remove(
        ctx_of(request), who, workspace_id, request.app.state.experiment_deletion.request
    )
    return DeleteWorkspaceResponse(completed=completed)
