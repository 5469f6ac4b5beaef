"""Config templates: list, get, create (POST), replace the config (PATCH, whose body is the config
itself, as det sends it), remove."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from pydantic import Field

from pedl.errors import InvalidArgument
from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts
from pedl.master.wire.base import Pagination
from pedl.master.wire.template import (
    DeleteTemplateResponse,
    GetTemplateResponse,
    GetTemplatesResponse,
    PatchTemplateConfigResponse,
    PostTemplateResponse,
)
from pedl.master.workspaces import MAX_NAME, TemplateQuery
from pedl.master.workspaces import templates as templates_service

router = APIRouter(prefix="/api/v1/templates")

NamePath = Annotated[str, Path(min_length=1, max_length=MAX_NAME)]


class TemplateBody(Body):
    """Determined's v1Template."""

    name: str | None = None  # det repeats the path's
    config: dict[str, Any]
    workspaceId: int | None = Field(None, ge=0, le=INT64_MAX)  # 0 or none: Uncategorized


CONFIG_SCHEMA: dict[str, Any] = {"type": "object", "description": "the template's config itself (det's body)"}


@router.get("", response_model=GetTemplatesResponse, response_model_exclude_unset=True)
def list_templates(
    request: Request,
    _: Caller = Depends(caller),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    name: str | None = None,
    workspaceIds: list[int] = Query(default_factory=list),
    sortBy: str | None = None,
    orderBy: str | None = None,
) -> GetTemplatesResponse:
    query = TemplateQuery(
        offset=offset, limit=limit, name=name, workspace_ids=workspaceIds, sort_by=sortBy, order_by=orderBy
    )
    page = templates_service.listing(ctx_of(request), query)
    return GetTemplatesResponse(
        templates=page.items, pagination=Pagination.of(offset, page.limit, page.total, len(page.items))
    )


@router.get("/{template_name}", response_model=GetTemplateResponse, response_model_exclude_unset=True)
def get_template(template_name: NamePath, request: Request, _: Caller = Depends(caller)) -> GetTemplateResponse:
    return GetTemplateResponse(template=templates_service.describe(ctx_of(request), template_name))


@router.post("/{template_name}", response_model=PostTemplateResponse, response_model_exclude_unset=True)
@accepts(TemplateBody, errors=(409,))
def create(
    template_name: NamePath, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PostTemplateResponse:
    req = parse(TemplateBody, body)
    if req.name not in (None, template_name):
        raise InvalidArgument.at("name", f"{req.name!r} is not the template of the path ({template_name!r})")
    shown = templates_service.create(ctx_of(request), who, template_name, req.config, req.workspaceId or 0)
    return PostTemplateResponse(template=shown)


@router.patch("/{template_name}", response_model=PatchTemplateConfigResponse, response_model_exclude_unset=True)
@accepts(CONFIG_SCHEMA)
def set_config(
    template_name: NamePath, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> PatchTemplateConfigResponse:
    return PatchTemplateConfigResponse(template=templates_service.set_config(ctx_of(request), who, template_name, body))


@router.delete("/{template_name}", response_model=DeleteTemplateResponse, response_model_exclude_unset=True)
def remove(template_name: NamePath, request: Request, who: Caller = Depends(caller)) -> DeleteTemplateResponse:
    templates_service.remove(ctx_of(request), who, template_name)
    return DeleteTemplateResponse()
