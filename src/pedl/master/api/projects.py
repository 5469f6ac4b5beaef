"""Projects: a workspace's (or, for workspace 0, every workspace's) list, create one in a workspace,
get, edit, archive, move, annotate (notes) and delete one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, pagination, parse
from pedl.master.api.openapi import accepts
from pedl.master.wire.base import ts
from pedl.master.workspaces import ProjectQuery, project_edits
from pedl.master.workspaces import projects as projects_service

router = APIRouter(prefix="/api/v1")


class CreateProjectBody(Body):
    name: str
    workspaceId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's
    description: str | None = None
    key: str | None = None


def project(shown: projects_service.Shown) -> dict[str, Any]:
    """Determined's v1Project (every key its binding requires)."""
    p = shown.project
    return {
        "id": p.id,
        "name": p.name,
        "workspaceId": p.workspace_id,
        "workspaceName": shown.workspace_name,
        "description": p.description,
        "key": p.key,
        "archived": shown.archived,
        "immutable": p.immutable,
        "errorMessage": "",
        "notes": p.notes or [],
        "numExperiments": shown.num_experiments,
        "numActiveExperiments": shown.num_active_experiments,
        "numRuns": shown.num_runs,
        "lastExperimentStartedAt": ts(shown.last_experiment_started_at),
        "state": "WORKSPACE_STATE_UNSPECIFIED",
        "userId": p.owner_id or 0,
        "username": shown.username,
    }


@router.get("/workspaces/{workspace_id}/projects")
def list_projects(
    workspace_id: IdPath,
    request: Request,
    _: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    name: str | None = None,
    archived: bool | None = None,
    users: list[str] = Query(default_factory=list),
    userIds: list[int] = Query(default_factory=list),
    sortBy: str | None = None,
    orderBy: str | None = None,
) -> dict:
    """The workspace's projects; workspace 0: every workspace's, as in Determined."""
    query = ProjectQuery(
        workspace_id=workspace_id,
        offset=offset,
        limit=limit,
        name=name,
        archived=archived,
        usernames=users,
        user_ids=userIds,
        sort_by=sortBy,
        order_by=orderBy,
    )
    rows, total, page = projects_service.listing(ctx_of(request), query)
    return {"projects": [project(p) for p in rows], "pagination": pagination(offset, page, total, len(rows))}


@router.post("/workspaces/{workspace_id}/projects")
@accepts(CreateProjectBody, errors=(409,))
def create(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    req = parse(CreateProjectBody, body)
    if req.workspaceId not in (None, workspace_id):
        raise InvalidArgument.at("workspaceId", f"{req.workspaceId} is not the workspace of the path ({workspace_id})")
    shown = projects_service.create(ctx_of(request), who, workspace_id, req.name, req.description, req.key)
    return {"project": project(shown)}


@router.get("/projects/{project_id}")
def get_project(project_id: IdPath, request: Request, _: Caller = Depends(caller)) -> dict:
    return {"project": project(projects_service.describe(ctx_of(request), project_id))}


class PatchProjectBody(Body):
    name: str | None = None
    description: str | None = None
    key: str | None = None


@router.patch("/projects/{project_id}")
@accepts(PatchProjectBody, errors=(409,))
def patch(project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(PatchProjectBody, body)
    shown = project_edits.patch(
        ctx_of(request), who, project_id, name=req.name, description=req.description, key=req.key
    )
    return {"project": project(shown)}


@router.post("/projects/{project_id}/archive")
def archive(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    project_edits.set_archived(ctx_of(request), who, project_id, True)
    return {}


@router.post("/projects/{project_id}/unarchive")
def unarchive(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> dict:
    project_edits.set_archived(ctx_of(request), who, project_id, False)
    return {}


class MoveProjectBody(Body):
    destinationWorkspaceId: int = Field(..., ge=1, le=INT64_MAX)
    projectId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's


@router.post("/projects/{project_id}/move")
@accepts(MoveProjectBody, errors=(409,))
def move(project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(MoveProjectBody, body)
    if req.projectId not in (None, project_id):
        raise InvalidArgument.at("projectId", f"{req.projectId} is not the project of the path ({project_id})")
    project_edits.move(ctx_of(request), who, project_id, req.destinationWorkspaceId)
    return {}


class NoteBody(Body):
    name: str
    contents: str


class PutNotesBody(Body):
    notes: list[Any]
    projectId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's


@router.post("/projects/{project_id}/notes")
@accepts(NoteBody)
def add_note(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    req = parse(NoteBody, body)
    notes = project_edits.set_notes(ctx_of(request), who, project_id, [req.model_dump()], append=True)
    return {"notes": notes}


@router.put("/projects/{project_id}/notes")
@accepts(PutNotesBody)
def put_notes(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> dict:
    req = parse(PutNotesBody, body)
    if req.projectId not in (None, project_id):
        raise InvalidArgument.at("projectId", f"{req.projectId} is not the project of the path ({project_id})")
    return {"notes": project_edits.set_notes(ctx_of(request), who, project_id, req.notes, append=False)}


@router.delete("/projects/{project_id}")
def delete_project(project_id: IdPath, request: Request, who: Caller = Depends(caller)) -> dict:
    """Its experiments (all ended) are deleted by the master's worker: `completed` is false while any are
    (det then polls until the project is not found)."""
    completed = project_edits.remove(ctx_of(request), who, project_id, request.app.state.experiment_deletion.request)
    return {"completed": completed}
