"""v1Model and v1ModelVersion: every key is declared (an unknown one is refused), labels are strings,
and a version carries its model and its checkpoint in full."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.wire.base import Pagination
from pedl.master.wire.checkpoint import Checkpoint, CheckpointTrainingMetadata
from pedl.master.wire.model import GetModelsResponse, GetModelVersionsResponse, Model, ModelVersion

MODEL: dict[str, Any] = {
    "id": 1,
    "name": "m",
    "description": "",
    "notes": "",
    "metadata": {},
    "labels": ["a"],
    "creationTime": "2024-01-01T00:00:00Z",
    "lastUpdatedTime": "2024-01-01T00:00:00Z",
    "archived": False,
    "numVersions": 1,
    "userId": 2,
    "username": "u",
    "workspaceId": 1,
}


def checkpoint() -> Checkpoint:
    return Checkpoint(
        uuid="c",
        state="STATE_COMPLETED",
        deleting=False,
        metadata={"steps_completed": 1},
        resources={},
        training=CheckpointTrainingMetadata(),
        reportTime="2024-01-01T00:00:00Z",
        taskId="",
        allocationId="",
        storage={},
        storageId=1,
    )


def version(**over: Any) -> dict[str, Any]:
    return {
        "id": 3,
        "version": 1,
        "model": Model(**MODEL),
        "checkpoint": checkpoint(),
        "creationTime": "2024-01-01T00:00:00Z",
        "lastUpdatedTime": "2024-01-01T00:00:00Z",
        "name": "",
        "comment": "",
        "notes": "",
        "metadata": {},
        "labels": [],
        "userId": 2,
        "username": "u",
        **over,
    }


def test_a_model_refuses_an_unknown_key_and_a_missing_one() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Model(**MODEL, project="p")
    with pytest.raises(ValidationError, match="numVersions"):
        Model(**{k: v for k, v in MODEL.items() if k != "numVersions"})
    with pytest.raises(ValidationError, match="labels"):
        Model(**{**MODEL, "labels": [1]})


def test_a_version_carries_its_model_and_checkpoint() -> None:
    sent = ModelVersion(**version()).model_dump(mode="json", exclude_unset=True)
    assert sent["model"] == MODEL
    assert sent["checkpoint"]["uuid"] == "c" and sent["checkpoint"]["training"] == {}
    with pytest.raises(ValidationError, match="checkpoint"):
        ModelVersion(**version(checkpoint=None))


def test_the_pages() -> None:
    models = GetModelsResponse(models=[Model(**MODEL)], pagination=Pagination.of(0, 0, 1, 1))
    assert list(models.model_dump(exclude_unset=True)) == ["models", "pagination"]
    versions = GetModelVersionsResponse(
        model=Model(**MODEL), modelVersions=[ModelVersion(**version())], pagination=Pagination.of(0, 1, 1, 1)
    )
    assert list(versions.model_dump(exclude_unset=True)) == ["model", "modelVersions", "pagination"]


def test_each_model_registry_route_declares_its_answer_and_leaves_unset_fields_out(tmp_path: Path) -> None:
    app = create_app(MasterConfig(data_dir=tmp_path / "master", port=0))
    routes = [
        r
        for r in app.routes
        if isinstance(r, APIRoute) and (r.path.startswith("/api/v1/models") or r.path == "/api/v1/model/labels")
    ]
    assert len(routes) >= 13
    for route in routes:
        if route.path.endswith("/metrics"):  # a stream of metric reports, not a registry message
            continue
        assert route.response_model is not None and route.response_model.__module__ == Model.__module__, route.path
        assert route.response_model_exclude_unset, route.path
