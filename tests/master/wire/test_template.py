"""v1Template and the template routes' answers: every key is declared (an unknown one is refused), the
config is a mapping, and each template route declares its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.wire.base import Pagination
from pedl.master.wire.template import DeleteTemplateResponse, GetTemplatesResponse, Template

TEMPLATE: dict[str, Any] = {
    "name": "base",
    "config": {"searcher": {"name": "single", "metric": "loss"}, "max_restarts": 2},
    "workspaceId": 1,
    "userId": 3,
    "username": "alice",
}


def test_a_template_refuses_an_unknown_key_a_missing_one_and_a_config_not_a_mapping() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Template(**TEMPLATE, description="")
    with pytest.raises(ValidationError, match="workspaceId"):
        Template(**{k: v for k, v in TEMPLATE.items() if k != "workspaceId"})
    with pytest.raises(ValidationError, match="config"):
        Template(**{**TEMPLATE, "config": "max_restarts: 2"})


def test_the_config_is_sent_as_stored() -> None:
    assert Template(**TEMPLATE).model_dump(exclude_unset=True) == TEMPLATE


def test_the_answers() -> None:
    page = GetTemplatesResponse(templates=[Template(**TEMPLATE)], pagination=Pagination.of(0, 1000, 1, 1))
    assert list(page.model_dump(exclude_unset=True)) == ["templates", "pagination"]
    assert DeleteTemplateResponse().model_dump(exclude_unset=True) == {}


def test_each_template_route_declares_its_answer(tmp_path: Path) -> None:
    app = create_app(MasterConfig(data_dir=tmp_path / "master", port=0))
    routes = [r for r in app.routes if isinstance(r, APIRoute) and r.endpoint.__module__ == "pedl.master.api.templates"]
    assert len(routes) == 5
    for route in routes:
        assert route.response_model is not None and route.response_model.__module__ == Template.__module__, route.path
        assert route.response_model_exclude_unset, route.path
