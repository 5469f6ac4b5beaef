"""v1Project and the project routes' answers: every key is declared (an unknown one is refused, in a note
too), a project without experiments sends a null lastExperimentStartedAt, and each project route declares
its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.wire.base import Pagination
from pedl.master.wire.project import (
    AddProjectNoteResponse,
    GetWorkspaceProjectsResponse,
    MoveProjectResponse,
    Note,
    Project,
)

PROJECT: dict[str, Any] = {
    "id": 4,
    "name": "Cats",
    "workspaceId": 2,
    "workspaceName": "Vision",
    "description": "",
    "key": "CATS",
    "archived": False,
    "immutable": False,
    "errorMessage": "",
    "notes": [],
    "numExperiments": 0,
    "numActiveExperiments": 0,
    "numRuns": 0,
    "lastExperimentStartedAt": None,
    "state": "WORKSPACE_STATE_UNSPECIFIED",
    "userId": 3,
    "username": "alice",
}


def test_a_project_refuses_an_unknown_key_and_a_missing_one() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Project(**PROJECT, workspace={})
    with pytest.raises(ValidationError, match="lastExperimentStartedAt"):
        Project(**{k: v for k, v in PROJECT.items() if k != "lastExperimentStartedAt"})


def test_a_note_is_a_name_and_its_contents() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Note(name="n", contents="c", author="a")
    with pytest.raises(ValidationError, match="contents"):
        Note.model_validate({"name": "n"})
    sent = Project(**{**PROJECT, "notes": [Note(name="n", contents="c")]}).model_dump(exclude_unset=True)
    assert sent["notes"] == [{"name": "n", "contents": "c"}]


def test_a_project_without_experiments_sends_a_null_start_time() -> None:
    assert Project(**PROJECT).model_dump(exclude_unset=True) == PROJECT


def test_the_answers() -> None:
    page = GetWorkspaceProjectsResponse(projects=[Project(**PROJECT)], pagination=Pagination.of(0, 1000, 1, 1))
    assert list(page.model_dump(exclude_unset=True)) == ["projects", "pagination"]
    assert AddProjectNoteResponse(notes=[]).model_dump() == {"notes": []}
    assert MoveProjectResponse().model_dump(exclude_unset=True) == {}


def test_each_project_route_declares_its_answer(tmp_path: Path) -> None:
    app = create_app(MasterConfig(data_dir=tmp_path / "master", port=0))
    routes = [r for r in app.routes if isinstance(r, APIRoute) and r.endpoint.__module__ == "pedl.master.api.projects"]
    assert len(routes) == 10
    for route in routes:
        assert route.response_model is not None and route.response_model.__module__ == Project.__module__, route.path
        assert route.response_model_exclude_unset, route.path
