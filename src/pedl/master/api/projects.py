"""Projects: a workspace's (or, for workspace 0, every workspace's) list, create one in a workspace,
get, edit, archive, move, annotate (notes) and delete one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, IdPath, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.wire.base import Pagination
from pedl.master.wire.project import (
    AddProjectNoteResponse,
    ArchiveProjectResponse,
    DeleteProjectResponse,
    GetProjectResponse,
    GetWorkspaceProjectsResponse,
    MoveProjectResponse,
    PatchProjectResponse,
    PostProjectResponse,
    PutProjectNotesResponse,
    UnarchiveProjectResponse,
)
from pedl.master.workspaces import ProjectQuery, project_edits
from pedl.master.workspaces import projects as projects_service

router = APIRouter(prefix="/api/v1")


class CreateProjectBody(Body):
    name: str
    workspaceId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's
    description: str | None = None
    key: str | None = None


@router.get(
    "/workspaces/{workspace_id}/projects",
    response_model=GetWorkspaceProjectsResponse,
    response_model_exclude_unset=True,
)
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
) -> GetWorkspaceProjectsResponse:
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
    page = projects_service.listing(ctx_of(request), query)
    return GetWorkspaceProjectsResponse(
        projects=page.items, pagination=Pagination.of(offset, page.limit, page.total, len(page.items))
    )


@router.post(
    "/workspaces/{workspace_id}/projects", response_model=PostProjectResponse, response_model_exclude_unset=True
)
@accepts(CreateProjectBody, errors=(409,))
def create(
    workspace_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PostProjectResponse:
    req = parse(CreateProjectBody, body)
    if req.workspaceId not in (None, workspace_id):
        raise InvalidArgument.at("workspaceId", f"{req.workspaceId} is not the workspace of the path ({workspace_id})")
    shown = projects_service.create(ctx_of(request), who, workspace_id, req.name, req.description, req.key)
    return PostProjectResponse(project=shown)


@router.get("/projects/{project_id}", response_model=GetProjectResponse, response_model_exclude_unset=True)
def get_project(project_id: IdPath, request: Request, _: Caller = Depends(caller)) -> GetProjectResponse:
    return GetProjectResponse(project=projects_service.describe(ctx_of(request), project_id))


class PatchProjectBody(Body):
    name: str | None = None
    description: str | None = None
    key: str | None = None


@router.patch("/projects/{project_id}", response_model=PatchProjectResponse, response_model_exclude_unset=True)
@accepts(PatchProjectBody, errors=(409,))
def patch(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PatchProjectResponse:
    req = parse(PatchProjectBody, body)
    shown = project_edits.patch(
        ctx_of(request), who, project_id, name=req.name, description=req.description, key=req.key
    )
    return PatchProjectResponse(project=shown)


@router.post("/projects/{project_id}/archive", response_model=ArchiveProjectResponse, response_model_exclude_unset=True)
def archive(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> ArchiveProjectResponse:
    project_edits.set_archived(ctx_of(request), who, project_id, True)
    return ArchiveProjectResponse()


@router.post(
    "/projects/{project_id}/unarchive", response_model=UnarchiveProjectResponse, response_model_exclude_unset=True
)
def unarchive(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> UnarchiveProjectResponse:
    project_edits.set_archived(ctx_of(request), who, project_id, False)
    return UnarchiveProjectResponse()


class MoveProjectBody(Body):
    destinationWorkspaceId: int = Field(..., ge=1, le=INT64_MAX)
    projectId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's


@router.post("/projects/{project_id}/move", response_model=MoveProjectResponse, response_model_exclude_unset=True)
@accepts(MoveProjectBody, errors=(409,))
def move(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> MoveProjectResponse:
    req = parse(MoveProjectBody, body)
    if req.projectId not in (None, project_id):
        raise InvalidArgument.at("projectId", f"{req.projectId} is not the project of the path ({project_id})")
    project_edits.move(ctx_of(request), who, project_id, req.destinationWorkspaceId)
    return MoveProjectResponse()


class NoteBody(Body):
    name: str
    contents: str


class PutNotesBody(Body):
    notes: list[Any]
    projectId: int | None = Field(None, ge=0, le=INT64_MAX)  # det repeats the path's


@router.post("/projects/{project_id}/notes", response_model=AddProjectNoteResponse, response_model_exclude_unset=True)
@accepts(NoteBody)
def add_note(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> AddProjectNoteResponse:
    req = parse(NoteBody, body)
    notes = project_edits.set_notes(ctx_of(request), who, project_id, [req.model_dump()], append=True)
    return AddProjectNoteResponse(notes=notes)


@router.put("/projects/{project_id}/notes", response_model=PutProjectNotesResponse, response_model_exclude_unset=True)
@accepts(PutNotesBody)
def put_notes(
    project_id: IdPath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PutProjectNotesResponse:
    req = parse(PutNotesBody, body)
    if req.projectId not in (None, project_id):
        raise InvalidArgument.at("projectId", f"{req.projectId} is not the project of the path ({project_id})")
    notes = project_edits.set_notes(ctx_of(request), who, project_id, req.notes, append=False)
    return PutProjectNotesResponse(notes=notes)


@router.delete("/projects/{project_id}", response_model=DeleteProjectResponse, response_model_exclude_unset=True)
def delete_project(project_id: IdPath, request: Request, who: Caller = Depends(caller)) -> DeleteProjectResponse:
    """Its experiments (all ended) are deleted by the master's worker: `completed` is false while any are
    (det then polls until the project is not found)."""
    completed = project_edits.remove(ctx_of(request), who, project_id, request.app.state.experiment_deletion.request)
    return DeleteProjectResponse(completed=completed)
