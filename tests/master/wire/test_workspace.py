"""v1Workspace and the workspace routes' answers: every key is declared (an unknown one is refused), the
state is one of Determined's, a workspace without storage of its own sends a null storage, and each
workspace route declares its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.wire.base import Pagination
from pedl.master.wire.workspace import (
    ArchiveWorkspaceResponse,
    DeleteWorkspaceResponse,
    GetWorkspacesResponse,
    PostWorkspaceResponse,
    Workspace,
)

WORKSPACE: dict[str, Any] = {
    "id": 2,
    "name": "Vision",
    "archived": False,
    "immutable": False,
    "errorMessage": "",
    "numExperiments": 0,
    "numProjects": 1,
    "pinned": True,
    "state": "WORKSPACE_STATE_UNSPECIFIED",
    "userId": 3,
    "username": "alice",
    "checkpointStorageConfig": None,
}


def test_a_workspace_refuses_an_unknown_key_a_missing_one_and_an_unknown_state() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Workspace(**WORKSPACE, agentUserGroup=None)
    with pytest.raises(ValidationError, match="checkpointStorageConfig"):
        Workspace(**{k: v for k, v in WORKSPACE.items() if k != "checkpointStorageConfig"})
    with pytest.raises(ValidationError, match="state"):
        Workspace(**{**WORKSPACE, "state": "ACTIVE"})


def test_a_workspace_without_storage_of_its_own_sends_null() -> None:
    assert Workspace(**WORKSPACE).model_dump(exclude_unset=True) == WORKSPACE
    storage = {"type": "shared_fs", "host_path": "/data/ws"}
    sent = Workspace(**{**WORKSPACE, "checkpointStorageConfig": storage}).model_dump(exclude_unset=True)
    assert sent["checkpointStorageConfig"] == storage


def test_the_answers() -> None:
    page = GetWorkspacesResponse(workspaces=[Workspace(**WORKSPACE)], pagination=Pagination.of(0, 1000, 1, 1))
    assert list(page.model_dump(exclude_unset=True)) == ["workspaces", "pagination"]
    created = PostWorkspaceResponse(workspace=Workspace(**WORKSPACE), namespaceBindings={})
    assert created.model_dump(exclude_unset=True)["namespaceBindings"] == {}
    assert ArchiveWorkspaceResponse().model_dump(exclude_unset=True) == {}
    assert DeleteWorkspaceResponse(completed=False).model_dump() == {"completed": False}
    with pytest.raises(ValidationError, match="extra"):
        ArchiveWorkspaceResponse(completed=True)


def test_each_workspace_route_declares_its_answer(tmp_path: Path) -> None:
    app = create_app(MasterConfig(data_dir=tmp_path / "master", port=0))
    routes = [
        r for r in app.routes if isinstance(r, APIRoute) and r.endpoint.__module__ == "pedl.master.api.workspaces"
    ]
    assert len(routes) == 9
    for route in routes:
        assert route.response_model is not None and route.response_model.__module__ == Workspace.__module__, route.path
        assert route.response_model_exclude_unset, route.path
