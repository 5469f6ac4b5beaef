"""Workspaces: list (with Determined's name lookups), create, get."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, pagination, parse
from pedl.master.api.openapi import accepts
from pedl.master.services import workspaces as workspaces_service
from pedl.master.services.workspaces import WorkspaceQuery

router = APIRouter(prefix="/api/v1/workspaces")


class CreateWorkspaceBody(Body):
    name: str
    # what det may send and pedl does not keep per workspace: refused when set, never dropped
    agentUserGroup: Any = None
    checkpointStorageConfig: Any = None
    defaultComputePool: Any = None
    defaultAuxPool: Any = None
    clusterNamespaceMeta: Any = None
    clusterQuotaPairs: Any = None


UNSUPPORTED = ("agentUserGroup", "checkpointStorageConfig", "defaultComputePool", "defaultAuxPool",
               "clusterNamespaceMeta", "clusterQuotaPairs")


def workspace(shown: workspaces_service.Shown) -> dict[str, Any]:
    """Determined's v1Workspace (every key its binding requires)."""
    w = shown.workspace
    return {"id": w.id, "name": w.name, "archived": w.archived, "immutable": w.immutable, "errorMessage": "",
            "numExperiments": shown.num_experiments, "numProjects": shown.num_projects, "pinned": False,
            "state": "WORKSPACE_STATE_UNSPECIFIED", "userId": w.owner_id or 0, "username": shown.username}


@router.get("")
def list_workspaces(request: Request, _: Caller = Depends(caller),
                    offset: int = Query(0, ge=0, le=INT64_MAX), limit: int = Query(0, ge=0, le=INT64_MAX),
                    name: str | None = None, nameCaseSensitive: str | None = None, archived: bool | None = None,
                    pinned: bool | None = None, users: list[str] = Query(default_factory=list),
                    userIds: list[int] = Query(default_factory=list), sortBy: str | None = None,
                    orderBy: str | None = None) -> dict:
    query = WorkspaceQuery(offset=offset, limit=limit, name=name, name_case_sensitive=nameCaseSensitive,
                           archived=archived, pinned=pinned, usernames=users, user_ids=userIds, sort_by=sortBy,
                           order_by=orderBy)
    rows, total, page = workspaces_service.listing(ctx_of(request), query)
    return {"workspaces": [workspace(w) for w in rows], "pagination": pagination(offset, page, total, len(rows))}


@router.post("")
@accepts(CreateWorkspaceBody, errors=(409,))
def create(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(CreateWorkspaceBody, body)
    for key in UNSUPPORTED:
        if getattr(req, key) not in (None, {}, ""):
            raise InvalidArgument.at(key, "pedl does not keep this per workspace; leave it unset")
    # det iterates namespaceBindings after a create (a Kubernetes namespace per cluster; pedl has none)
    return {"workspace": workspace(workspaces_service.create(ctx_of(request), who, req.name)), "namespaceBindings": {}}


@router.get("/{workspace_id}")
def get_workspace(workspace_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    return {"workspace": workspace(workspaces_service.describe(ctx_of(request), workspace_id))}
