"""A model version keeps its checkpoint from checkpoint garbage collection: a registered checkpoint
is never planned for deletion, one registered after the plan is still left alone, one whose files are
being deleted cannot be registered, and deleting its last version hands it back to its experiment's
policy (a collection is asked for)."""

from __future__ import annotations

import json
import uuid as uuid_lib
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.common.checkpoint_storage import SharedFSStorage, storage_from_config
from pedl.config.master_config import MasterConfig
from pedl.master.db import models
from pedl.master.workers.checkpoint_gc import CheckpointGC
from tests.master.fakes import FakeAgent, StartedTask, bearer, create_experiment, ctx_of, post

CONFIG = """\
name: registry-gc
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
checkpoint_storage: {save_trial_best: 0, save_trial_latest: 1, save_experiment_best: 0}
"""


@pytest.fixture
def master_config(master_config: MasterConfig) -> MasterConfig:
    # the fake agent runs no checkpoint GC task: these tests drive the master-side path
    return master_config.model_copy(update={"checkpoint_gc_tasks": False})


@pytest.fixture
def gc(app: FastAPI) -> CheckpointGC:
    return app.state.checkpoint_gc


@pytest.fixture
def running(client: TestClient, user: dict, agent: FakeAgent) -> Iterator[tuple[int, StartedTask]]:
    exp = create_experiment(client, user, CONFIG)
    [task] = agent.start_all()
    yield exp["id"], task


def storage_of(app: FastAPI) -> SharedFSStorage:
    storage = storage_from_config(ctx_of(app).config.effective_checkpoint_storage().model_dump())
    assert isinstance(storage, SharedFSStorage)
    return storage


def report(client: TestClient, app: FastAPI, task: StartedTask, steps: int) -> str:
    name = str(uuid_lib.uuid4())
    with storage_of(app).store_path(name) as path:
        (path / "state.json").write_text("{}")
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "training": {},
        "metadata": {"steps_completed": steps},
        "resources": {"state.json": "2"},
        "state": "STATE_COMPLETED",
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def states(app: FastAPI, experiment_id: int) -> dict[str, str]:
    with ctx_of(app).db.session() as s:
        return {
            c.uuid: c.state
            for c in s.scalars(select(models.Checkpoint).where(models.Checkpoint.experiment_id == experiment_id))
        }


def register(client: TestClient, user: dict, ckpt: str) -> None:
    if client.get("/api/v1/models/keeper", headers=user).status_code == 404:
        assert post(client, "/api/v1/models", {"name": "keeper"}, user).status_code == 200
    r = post(client, "/api/v1/models/keeper/versions", {"checkpointUuid": ckpt}, user)
    assert r.status_code == 200, r.text


def test_a_registered_checkpoint_is_never_collected(
    client: TestClient, app: FastAPI, user: dict, agent: FakeAgent, gc: CheckpointGC, running: tuple[int, StartedTask]
) -> None:
    exp_id, task = running
    old, kept, latest = (report(client, app, task, steps) for steps in (2, 4, 6))
    register(client, user, kept)
    agent.exit(task.allocation_id, 0)
    gc.run_pending()
    assert states(app, exp_id) == {old: "STATE_DELETED", kept: "STATE_COMPLETED", latest: "STATE_COMPLETED"}
    storage = storage_of(app)
    assert [storage.exists(u) for u in (old, kept, latest)] == [False, True, True]
    version = client.get("/api/v1/models/keeper/versions/1", headers=user).json()["modelVersion"]
    assert (version["checkpoint"]["state"], version["checkpoint"]["resources"]) == (
        "STATE_COMPLETED",
        {"state.json": "2"},
    )

    # a collection later (a master restart sweeps again) keeps it too
    gc.request(exp_id)
    gc.run_pending()
    assert states(app, exp_id)[kept] == "STATE_COMPLETED" and storage.exists(kept)

    # its last version deleted, the experiment's policy applies again: a collection is asked for
    assert client.delete("/api/v1/models/keeper/versions/1", headers=user).status_code == 200
    gc.run_pending()  # (or the background worker did it first: run_pending waits for it)
    assert states(app, exp_id)[kept] == "STATE_DELETED" and not storage.exists(kept)


def test_a_checkpoint_registered_after_the_plan_is_left_alone(
    client: TestClient,
    app: FastAPI,
    user: dict,
    agent: FakeAgent,
    gc: CheckpointGC,
    running: tuple[int, StartedTask],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Registered between the plan and the hold: not held, not deleted. Once held (PARTIALLY_DELETED, its
    files about to go), a checkpoint cannot be registered."""
    exp_id, task = running
    doomed, other, latest = (report(client, app, task, steps) for steps in (2, 3, 6))
    hold, delete = gc._hold, gc._delete

    def registered_meanwhile(the_plan, outcome):  # CheckpointGC._hold's
        assert [d.uuid for d in the_plan.deletions] == [doomed, other]  # both were planned
        register(client, user, doomed)
        return hold(the_plan, outcome)

    def refused_once_held(deletions, outcome):  # CheckpointGC._delete's
        assert [d.uuid for d in deletions] == [other]
        assert states(app, exp_id)[other] == "STATE_PARTIALLY_DELETED"
        r = post(client, "/api/v1/models/keeper/versions", {"checkpointUuid": other}, user)
        assert r.status_code == 400 and "checkpointUuid" in r.text and "STATE_PARTIALLY_DELETED" in r.text, r.text
        return delete(deletions, outcome)

    monkeypatch.setattr(gc, "_hold", registered_meanwhile)
    monkeypatch.setattr(gc, "_delete", refused_once_held)
    with gc._busy:  # the background worker waits: this test runs the one collection itself
        agent.exit(task.allocation_id, 0)
        outcome = gc.collect(exp_id)
    assert outcome.deleted == [other]
    assert states(app, exp_id) == {doomed: "STATE_COMPLETED", other: "STATE_DELETED", latest: "STATE_COMPLETED"}
    assert storage_of(app).exists(doomed)


def test_deleting_a_model_hands_its_checkpoints_back(
    client: TestClient, app: FastAPI, user: dict, agent: FakeAgent, gc: CheckpointGC, running: tuple[int, StartedTask]
) -> None:
    exp_id, task = running
    kept, latest = report(client, app, task, 2), report(client, app, task, 6)
    register(client, user, kept)
    register(client, user, kept)  # two versions of one checkpoint
    agent.exit(task.allocation_id, 0)
    gc.run_pending()
    assert client.delete("/api/v1/models/keeper/versions/1", headers=user).status_code == 200
    gc.run_pending()
    assert states(app, exp_id)[kept] == "STATE_COMPLETED"  # version 2 still holds it
    assert client.delete("/api/v1/models/keeper", headers=user).status_code == 200
    gc.run_pending()
    assert states(app, exp_id) == {kept: "STATE_DELETED", latest: "STATE_COMPLETED"}
    assert json.loads(client.get("/api/v1/models", headers=user).text)["models"] == []
