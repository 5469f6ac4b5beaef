"""The model registry (Determined's /api/v1/models): models by name (or id, when only digits), their
versions (checkpoints), archive, labels. Any logged-in user reads; the owner or an admin changes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.model_registry import ModelQuery
from pedl.master.model_registry import service as model_registry
from pedl.master.model_registry import versions as model_versions
from pedl.master.wire.base import Pagination
from pedl.master.wire.model import (
    ArchiveModelResponse,
    DeleteModelResponse,
    DeleteModelVersionResponse,
    GetModelLabelsResponse,
    GetModelResponse,
    GetModelsResponse,
    GetModelVersionResponse,
    GetModelVersionsResponse,
    PatchModelResponse,
    PatchModelVersionResponse,
    PostModelResponse,
    PostModelVersionResponse,
    UnarchiveModelResponse,
)

INT32_MAX = 2**31 - 1

router = APIRouter()
ModelName = Annotated[str, Path(description="the model's name, or its id", max_length=1024)]
VersionNum = Annotated[int, Path(ge=0, le=INT32_MAX, description="the version's number (1, 2, 3...)")]


# -- models -----------------------------------------------------------------------------------------


class PostModelBody(Body):
    name: str
    description: str | None = None
    notes: str | None = None
    metadata: dict[str, Any] | None = None
    labels: list[str] | None = None
    workspaceId: int | None = Field(None, ge=0, le=INT32_MAX)
    workspaceName: str | None = None


class PatchModelBody(Body):
    name: str | None = None
    description: str | None = None
    notes: str | None = None
    metadata: dict[str, Any] | None = None
    labels: list[str] | None = None
    workspaceId: int | None = Field(None, ge=0, le=INT32_MAX)
    workspaceName: str | None = None


@router.get("/api/v1/models", response_model=GetModelsResponse, response_model_exclude_unset=True)
def list_models(
    request: Request,
    _: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    sortBy: str = "SORT_BY_UNSPECIFIED",
    orderBy: str | None = None,
    name: str = "",
    description: str = "",
    model_id: int | None = Query(None, alias="id", ge=0, le=INT64_MAX),
    labels: list[str] = Query(default_factory=list),
    archived: bool | None = None,
    userIds: list[int] = Query(default_factory=list),
    users: list[str] = Query(default_factory=list),
    workspaceIds: list[int] = Query(default_factory=list),
    workspaceNames: list[str] = Query(default_factory=list),
) -> GetModelsResponse:
    """Models matching every filter given (name and description match a part, case aside; labels:
    all of them), one page of at most 100."""
    query = ModelQuery(
        offset=offset,
        limit=limit,
        sort_by=sortBy,
        descending=orderBy == "ORDER_BY_DESC",
        name=name,
        description=description,
        model_id=model_id,
        labels=labels,
        archived=archived,
        user_ids=userIds,
        usernames=users,
        workspace_ids=workspaceIds,
        workspace_names=workspaceNames,
    )
    page = model_registry.listing(ctx_of(request), query)
    return GetModelsResponse(models=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items)))


@router.post("/api/v1/models", response_model=PostModelResponse, response_model_exclude_unset=True)
@accepts(PostModelBody, errors=(409,))
def create_model(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> PostModelResponse:
    req = parse(PostModelBody, body)
    shown = model_registry.create(
        ctx_of(request),
        who,
        name=req.name,
        description=req.description,
        notes=req.notes,
        metadata=req.metadata,
        labels=req.labels,
        workspace_id=req.workspaceId,
        workspace_name=req.workspaceName,
    )
    return PostModelResponse(model=shown)


@router.get("/api/v1/models/{modelName}", response_model=GetModelResponse, response_model_exclude_unset=True)
def get_model(modelName: ModelName, request: Request, _: Caller = Depends(caller)) -> GetModelResponse:
    return GetModelResponse(model=model_registry.describe(ctx_of(request), modelName))


@router.patch("/api/v1/models/{modelName}", response_model=PatchModelResponse, response_model_exclude_unset=True)
@accepts(PatchModelBody, errors=(409,))
def patch_model(
    modelName: ModelName, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PatchModelResponse:
    req = parse(PatchModelBody, body)
    shown = model_registry.patch(
        ctx_of(request),
        who,
        modelName,
        name=req.name,
        description=req.description,
        notes=req.notes,
        metadata=req.metadata,
        labels=req.labels,
        workspace_id=req.workspaceId,
        workspace_name=req.workspaceName,
    )
    return PatchModelResponse(model=shown)


@router.delete("/api/v1/models/{modelName}", response_model=DeleteModelResponse, response_model_exclude_unset=True)
def delete_model(modelName: ModelName, request: Request, who: Caller = Depends(caller)) -> DeleteModelResponse:
    """The model and all its versions; the checkpoints stay."""
    model_registry.delete(ctx_of(request), who, modelName)
    return DeleteModelResponse()


@router.post(
    "/api/v1/models/{modelName}/archive", response_model=ArchiveModelResponse, response_model_exclude_unset=True
)
def archive_model(
    modelName: ModelName, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> ArchiveModelResponse:
    model_registry.set_archived(ctx_of(request), who, modelName, True)
    return ArchiveModelResponse()


@router.post(
    "/api/v1/models/{modelName}/unarchive", response_model=UnarchiveModelResponse, response_model_exclude_unset=True
)
def unarchive_model(
    modelName: ModelName, request: Request, who: Caller = Depends(caller), _body: Any = Depends(json_body)
) -> UnarchiveModelResponse:
    model_registry.set_archived(ctx_of(request), who, modelName, False)
    return UnarchiveModelResponse()


@router.get("/api/v1/model/labels", response_model=GetModelLabelsResponse, response_model_exclude_unset=True)
def model_labels(
    request: Request, _: Caller = Depends(caller), workspaceId: int | None = Query(None, ge=0, le=INT32_MAX)
) -> GetModelLabelsResponse:
    """The labels used on models, the most used first (at most 1,000)."""
    return GetModelLabelsResponse(labels=model_registry.label_counts(ctx_of(request), workspaceId))


# -- versions ---------------------------------------------------------------------------------------


class PostModelVersionBody(Body):
    checkpointUuid: str
    modelName: str | None = None
    name: str | None = None
    comment: str | None = None
    notes: str | None = None
    metadata: dict[str, Any] | None = None
    labels: list[str] | None = None


class VersionCheckpoint(Body):
    uuid: str | None = None


class PatchModelVersionBody(Body):
    name: str | None = None
    comment: str | None = None
    notes: str | None = None
    metadata: dict[str, Any] | None = None
    labels: list[str] | None = None
    checkpoint: VersionCheckpoint | None = None


@router.get(
    "/api/v1/models/{modelName}/versions", response_model=GetModelVersionsResponse, response_model_exclude_unset=True
)
def list_versions(
    modelName: ModelName,
    request: Request,
    _: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    sortBy: str = "SORT_BY_UNSPECIFIED",
    orderBy: str | None = None,
) -> GetModelVersionsResponse:
    """One page of the model's versions (at most 100), by number unless sortBy says otherwise."""
    page = model_versions.listing(
        ctx_of(request), modelName, offset=offset, limit=limit, sort_by=sortBy, descending=orderBy == "ORDER_BY_DESC"
    )
    return GetModelVersionsResponse(
        model=page.model, modelVersions=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.post(
    "/api/v1/models/{modelName}/versions", response_model=PostModelVersionResponse, response_model_exclude_unset=True
)
@accepts(PostModelVersionBody, errors=(409,))
def register_version(
    modelName: ModelName, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PostModelVersionResponse:
    """Register a COMPLETED checkpoint as the model's next version."""
    req = parse(PostModelVersionBody, body)
    shown = model_versions.register(
        ctx_of(request),
        who,
        modelName,
        checkpoint_uuid=req.checkpointUuid,
        model_name=req.modelName,
        name=req.name,
        comment=req.comment,
        notes=req.notes,
        metadata=req.metadata,
        labels=req.labels,
    )
    return PostModelVersionResponse(modelVersion=shown)


@router.get(
    "/api/v1/models/{modelName}/versions/{modelVersionNum}",
    response_model=GetModelVersionResponse,
    response_model_exclude_unset=True,
)
def get_version(
    modelName: ModelName, modelVersionNum: VersionNum, request: Request, _: Caller = Depends(caller)
) -> GetModelVersionResponse:
    return GetModelVersionResponse(modelVersion=model_versions.describe(ctx_of(request), modelName, modelVersionNum))


@router.patch(
    "/api/v1/models/{modelName}/versions/{modelVersionNum}",
    response_model=PatchModelVersionResponse,
    response_model_exclude_unset=True,
)
@accepts(PatchModelVersionBody)
def patch_version(
    modelName: ModelName,
    modelVersionNum: VersionNum,
    request: Request,
    who: Caller = Depends(caller),
    body: dict = Depends(json_body),
) -> PatchModelVersionResponse:
    req = parse(PatchModelVersionBody, body)
    shown = model_versions.patch(
        ctx_of(request),
        who,
        modelName,
        modelVersionNum,
        name=req.name,
        comment=req.comment,
        notes=req.notes,
        metadata=req.metadata,
        labels=req.labels,
        checkpoint_uuid=req.checkpoint.uuid if req.checkpoint else None,
    )
    return PatchModelVersionResponse(modelVersion=shown)


@router.delete(
    "/api/v1/models/{modelName}/versions/{modelVersionNum}",
    response_model=DeleteModelVersionResponse,
    response_model_exclude_unset=True,
)
def delete_version(
    modelName: ModelName, modelVersionNum: VersionNum, request: Request, who: Caller = Depends(caller)
) -> DeleteModelVersionResponse:
    model_versions.delete(ctx_of(request), who, modelName, modelVersionNum)
    return DeleteModelVersionResponse()
