"""The model registry (Determined's /api/v1/models): models by name (or id, when only digits), their
versions (checkpoints), archive, labels. Any logged-in user reads; the owner or an admin changes."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from pedl.master.api import shapes
from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, pagination, parse
from pedl.master.api.openapi import accepts
from pedl.master.model_registry import ModelQuery, ModelView, VersionView
from pedl.master.model_registry import service as model_registry
from pedl.master.model_registry import versions as model_versions

INT32_MAX = 2**31 - 1

router = APIRouter()
ModelName = Annotated[str, Path(description="the model's name, or its id", max_length=1024)]
VersionNum = Annotated[int, Path(ge=0, le=INT32_MAX, description="the version's number (1, 2, 3...)")]


def model_json(v: ModelView) -> dict[str, Any]:
    """Determined's v1Model."""
    m = v.model
    return {"id": m.id, "name": m.name, "description": m.description, "notes": m.notes, "metadata": m.meta or {},
            "labels": v.labels, "creationTime": shapes.ts(m.created_at), "lastUpdatedTime": shapes.ts(m.updated_at),
            "archived": m.archived, "numVersions": v.num_versions, "userId": m.owner_id, "username": v.username,
            "workspaceId": m.workspace_id}


def version_json(v: VersionView) -> dict[str, Any]:
    """Determined's v1ModelVersion: its model and its checkpoint in full."""
    r = v.version
    return {"id": r.id, "version": r.version, "model": model_json(v.model),
            "checkpoint": shapes.checkpoint(*v.checkpoint), "creationTime": shapes.ts(r.created_at),
            "lastUpdatedTime": shapes.ts(r.updated_at), "name": r.name, "comment": r.comment, "notes": r.notes,
            "metadata": r.meta or {}, "labels": list(r.labels or []), "userId": r.owner_id, "username": v.username}


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


@router.get("/api/v1/models")
def list_models(request: Request, _: Caller = Depends(caller),
                offset: int = Query(0, ge=0, le=INT64_MAX), limit: int = Query(0, ge=0, le=INT64_MAX),
                sortBy: str = "SORT_BY_UNSPECIFIED", orderBy: str | None = None, name: str = "",
                description: str = "", model_id: int | None = Query(None, alias="id", ge=0, le=INT64_MAX),
                labels: list[str] = Query(default_factory=list), archived: bool | None = None,
                userIds: list[int] = Query(default_factory=list), users: list[str] = Query(default_factory=list),
                workspaceIds: list[int] = Query(default_factory=list),
                workspaceNames: list[str] = Query(default_factory=list)) -> dict:
    """Models matching every filter given (name and description match a part, case aside; labels:
    all of them), one page of at most 100."""
    query = ModelQuery(offset=offset, limit=limit, sort_by=sortBy, descending=orderBy == "ORDER_BY_DESC",
                       name=name, description=description, model_id=model_id, labels=labels, archived=archived,
                       user_ids=userIds, usernames=users, workspace_ids=workspaceIds, workspace_names=workspaceNames)
    rows, total = model_registry.listing(ctx_of(request), query)
    return {"models": [model_json(v) for v in rows], "pagination": pagination(offset, limit, total, len(rows))}


@router.post("/api/v1/models")
@accepts(PostModelBody, errors=(409,))
def create_model(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(PostModelBody, body)
    shown = model_registry.create(ctx_of(request), who, name=req.name, description=req.description, notes=req.notes,
                                  metadata=req.metadata, labels=req.labels, workspace_id=req.workspaceId,
                                  workspace_name=req.workspaceName)
    return {"model": model_json(shown)}


@router.get("/api/v1/models/{modelName}")
def get_model(modelName: ModelName, request: Request, _: Caller = Depends(caller)) -> dict:
    return {"model": model_json(model_registry.describe(ctx_of(request), modelName))}


@router.patch("/api/v1/models/{modelName}")
@accepts(PatchModelBody, errors=(409,))
def patch_model(modelName: ModelName, request: Request, who: Caller = Depends(caller),
                body: dict = Depends(json_body)) -> dict:
    req = parse(PatchModelBody, body)
    shown = model_registry.patch(ctx_of(request), who, modelName, name=req.name, description=req.description,
                                 notes=req.notes, metadata=req.metadata, labels=req.labels,
                                 workspace_id=req.workspaceId, workspace_name=req.workspaceName)
    return {"model": model_json(shown)}


@router.delete("/api/v1/models/{modelName}")
def delete_model(modelName: ModelName, request: Request, who: Caller = Depends(caller)) -> dict:
    """The model and all its versions; the checkpoints stay."""
    model_registry.delete(ctx_of(request), who, modelName)
    return {}


@router.post("/api/v1/models/{modelName}/archive")
def archive_model(modelName: ModelName, request: Request, who: Caller = Depends(caller),
                  _body: Any = Depends(json_body)) -> dict:
    model_registry.set_archived(ctx_of(request), who, modelName, True)
    return {}


@router.post("/api/v1/models/{modelName}/unarchive")
def unarchive_model(modelName: ModelName, request: Request, who: Caller = Depends(caller),
                    _body: Any = Depends(json_body)) -> dict:
    model_registry.set_archived(ctx_of(request), who, modelName, False)
    return {}


@router.get("/api/v1/model/labels")
def model_labels(request: Request, _: Caller = Depends(caller),
                 workspaceId: int | None = Query(None, ge=0, le=INT32_MAX)) -> dict:
    """The labels used on models, the most used first (at most 1,000)."""
    return {"labels": model_registry.label_counts(ctx_of(request), workspaceId)}


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


@router.get("/api/v1/models/{modelName}/versions")
def list_versions(modelName: ModelName, request: Request, _: Caller = Depends(caller),
                  offset: int = Query(0, ge=0, le=INT64_MAX), limit: int = Query(0, ge=0, le=INT64_MAX),
                  sortBy: str = "SORT_BY_UNSPECIFIED", orderBy: str | None = None) -> dict:
    """One page of the model's versions (at most 100), by number unless sortBy says otherwise."""
    model, rows, total = model_versions.listing(ctx_of(request), modelName, offset=offset, limit=limit,
                                                sort_by=sortBy, descending=orderBy == "ORDER_BY_DESC")
    return {"model": model_json(model), "modelVersions": [version_json(v) for v in rows],
            "pagination": pagination(offset, limit, total, len(rows))}


@router.post("/api/v1/models/{modelName}/versions")
@accepts(PostModelVersionBody, errors=(409,))
def register_version(modelName: ModelName, request: Request, who: Caller = Depends(caller),
                     body: dict = Depends(json_body)) -> dict:
    """Register a COMPLETED checkpoint as the model's next version."""
    req = parse(PostModelVersionBody, body)
    shown = model_versions.register(ctx_of(request), who, modelName, checkpoint_uuid=req.checkpointUuid,
                                    model_name=req.modelName, name=req.name, comment=req.comment, notes=req.notes,
                                    metadata=req.metadata, labels=req.labels)
    return {"modelVersion": version_json(shown)}


@router.get("/api/v1/models/{modelName}/versions/{modelVersionNum}")
def get_version(modelName: ModelName, modelVersionNum: VersionNum, request: Request,
                _: Caller = Depends(caller)) -> dict:
    return {"modelVersion": version_json(model_versions.describe(ctx_of(request), modelName, modelVersionNum))}


@router.patch("/api/v1/models/{modelName}/versions/{modelVersionNum}")
@accepts(PatchModelVersionBody)
def patch_version(modelName: ModelName, modelVersionNum: VersionNum, request: Request,
                  who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    req = parse(PatchModelVersionBody, body)
    shown = model_versions.patch(ctx_of(request), who, modelName, modelVersionNum, name=req.name,
                                 comment=req.comment, notes=req.notes, metadata=req.metadata, labels=req.labels,
                                 checkpoint_uuid=req.checkpoint.uuid if req.checkpoint else None)
    return {"modelVersion": version_json(shown)}


@router.delete("/api/v1/models/{modelName}/versions/{modelVersionNum}")
def delete_version(modelName: ModelName, modelVersionNum: VersionNum, request: Request,
                   who: Caller = Depends(caller)) -> dict:
    model_versions.delete(ctx_of(request), who, modelName, modelVersionNum)
    return {}
