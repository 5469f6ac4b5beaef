"""Model registry rows as v1Model and v1ModelVersion: the exact JSON of a known model and version, a
missing metadata sent as {} and the version's labels as a list."""

from __future__ import annotations

from pedl.master.db import models
from pedl.master.model_registry.to_wire import model, version
from pedl.master.wire.checkpoint import Checkpoint, CheckpointTrainingMetadata


def registered() -> models.RegisteredModel:
    return models.RegisteredModel(
        id=5,
        name="mnist",
        description="d",
        notes="n",
        meta=None,
        owner_id=2,
        workspace_id=1,
        archived=False,
        created_at=1_700_000_000.0,
        updated_at=1_700_000_001.25,
    )


def test_the_json_of_a_known_model() -> None:
    assert model(registered(), "alice", ["b", "a"], 3).model_dump(mode="json", exclude_unset=True) == {
        "id": 5,
        "name": "mnist",
        "description": "d",
        "notes": "n",
        "metadata": {},
        "labels": ["b", "a"],
        "creationTime": "2023-11-14T22:13:20Z",
        "lastUpdatedTime": "2023-11-14T22:13:21.250000Z",
        "archived": False,
        "numVersions": 3,
        "userId": 2,
        "username": "alice",
        "workspaceId": 1,
    }


def test_the_json_of_a_known_version() -> None:
    ckpt = Checkpoint(
        uuid="c",
        state="STATE_COMPLETED",
        deleting=False,
        metadata={"steps_completed": 1},
        resources={},
        training=CheckpointTrainingMetadata(),
        reportTime="2023-11-14T22:13:20Z",
        taskId="",
        allocationId="",
        storage={},
        storageId=1,
    )
    of = model(registered(), "alice", [], 1)
    row = models.ModelVersion(
        id=9,
        model_id=5,
        version=1,
        checkpoint_uuid="c",
        name="v1",
        comment="c",
        notes="",
        meta={"k": 1.5},
        labels=["x"],
        owner_id=3,
        created_at=1_700_000_002.0,
        updated_at=1_700_000_002.0,
    )
    sent = version(row, of, "bob", ckpt).model_dump(mode="json", exclude_unset=True)
    assert sent == {
        "id": 9,
        "version": 1,
        "model": of.model_dump(mode="json"),
        "checkpoint": ckpt.model_dump(mode="json", exclude_unset=True),
        "creationTime": "2023-11-14T22:13:22Z",
        "lastUpdatedTime": "2023-11-14T22:13:22Z",
        "name": "v1",
        "comment": "c",
        "notes": "",
        "metadata": {"k": 1.5},
        "labels": ["x"],
        "userId": 3,
        "username": "bob",
    }
    assert sent["checkpoint"]["training"] == {}
