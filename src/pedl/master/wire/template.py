"""Determined's v1Template and the answers of the template routes: list, get, create, replace the config
and delete."""

from __future__ import annotations

from typing import Any

from pedl.master.wire.base import Pagination, WireModel


class Template(WireModel):
    """v1Template, with pedl's owner (userId, username)."""

    name: str
    config: dict[str, Any]
    workspaceId: int
    userId: int
    username: str


class GetTemplatesResponse(WireModel):
    templates: list[Template]
    pagination: Pagination


class GetTemplateResponse(WireModel):
    template: Template


class PostTemplateResponse(WireModel):
    template: Template


class PatchTemplateConfigResponse(WireModel):
    template: Template


class DeleteTemplateResponse(WireModel):
    """Empty."""
