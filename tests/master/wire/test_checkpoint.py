"""v1Checkpoint and its answers: an unknown key is refused, sizes stay strings, and a field left unset
(an empty training, no searcherMetric) is left out of the JSON while one set to null is sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.routing import APIRoute
from pydantic import ValidationError

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.wire.base import Pagination
from pedl.master.wire.checkpoint import (
    AvgMetrics,
    Checkpoint,
    CheckpointTrainingMetadata,
    DeleteCheckpointsResponse,
    GetCheckpointsResponse,
)

checkpoint_module = Checkpoint.__module__


def fields(**over: Any) -> dict[str, Any]:
    return {
        "uuid": "u1",
        "state": "STATE_COMPLETED",
        "deleting": False,
        "metadata": {"steps_completed": 4},
        "resources": {"model.pt": "10"},
        "training": CheckpointTrainingMetadata(),
        "reportTime": "2024-01-01T00:00:00Z",
        "taskId": "t",
        "allocationId": "a",
        "storage": {"type": "s3"},
        "storageId": 7,
        **over,
    }


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Checkpoint(**fields(), size=10)
    with pytest.raises(ValidationError, match="extra"):
        CheckpointTrainingMetadata(trialID=1)  # pyright: ignore[reportCallIssue]


def test_sizes_are_int64_strings_not_numbers() -> None:
    with pytest.raises(ValidationError, match="resources"):
        Checkpoint(**fields(resources={"model.pt": 10}))


def test_a_checkpoint_of_no_trial_sends_an_empty_training() -> None:
    sent = Checkpoint(**fields()).model_dump(mode="json", exclude_unset=True)
    assert sent["training"] == {}
    assert list(sent) == [
        "uuid",
        "state",
        "deleting",
        "metadata",
        "resources",
        "training",
        "reportTime",
        "taskId",
        "allocationId",
        "storage",
        "storageId",
    ]


def test_searcher_metric_is_sent_only_when_set_and_then_even_as_null() -> None:
    training = CheckpointTrainingMetadata(trialId=1, experimentId=2, validationMetrics=AvgMetrics(avgMetrics={}))
    assert "searcherMetric" not in training.model_dump(exclude_unset=True)
    training.searcherMetric = None
    assert training.model_dump(exclude_unset=True)["searcherMetric"] is None
    training.searcherMetric = 3  # a metric keeps its JSON type: an int stays an int
    assert training.model_dump_json(exclude_unset=True).endswith('"searcherMetric":3}')


def test_a_page_and_an_empty_answer() -> None:
    page = GetCheckpointsResponse(checkpoints=[Checkpoint(**fields())], pagination=Pagination.of(0, 0, 1, 1))
    sent = page.model_dump(mode="json", exclude_unset=True)
    assert sent["pagination"] == {"offset": 0, "limit": 0, "startIndex": 0, "endIndex": 1, "total": 1}
    assert [c["uuid"] for c in sent["checkpoints"]] == ["u1"]
    assert DeleteCheckpointsResponse().model_dump() == {}
    with pytest.raises(ValidationError, match="extra"):
        DeleteCheckpointsResponse(deleted=["u1"])  # pyright: ignore[reportCallIssue]


CHECKPOINT_ROUTES = {
    ("POST", "/api/v1/checkpoints"),
    ("GET", "/api/v1/checkpoints/{uuid}"),
    ("GET", "/api/v1/checkpoints"),
    ("POST", "/api/v1/checkpoints/{uuid}/metadata"),
    ("DELETE", "/api/v1/checkpoints"),
    ("POST", "/api/v1/checkpoints/rm"),
    ("GET", "/api/v1/experiments/{experiment_id}/checkpoints"),
    ("GET", "/api/v1/trials/{trial_id}/checkpoints"),
}


def test_each_route_declares_its_answer_and_leaves_unset_fields_out(tmp_path: Path) -> None:
    app = create_app(MasterConfig(data_dir=tmp_path / "master", port=0))
    declared = {(method, r.path): r for r in app.routes if isinstance(r, APIRoute) for method in r.methods}
    for key in CHECKPOINT_ROUTES:
        route = declared[key]
        assert route.response_model is not None and route.response_model.__module__ == checkpoint_module, key
        assert route.response_model_exclude_unset, key
