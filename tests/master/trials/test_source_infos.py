"""Trial source infos and deletions: deleting an experiment deletes the links of its trials and those
naming its checkpoints (experiments/purge.py), in its own bounded step; the other links stay."""

from __future__ import annotations

import uuid as uuid_lib
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.common.checkpoint_storage import storage_from_config
from pedl.master.db import models
from pedl.master.experiments import purge as experiment_purge
from tests.master.fakes import (
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    ctx_of,
    post,
    task_header,
)

KEEP_ALL = SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 5}\n"  # garbage collection deletes none


@pytest.fixture
def fake(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    agent = FakeAgent(app, "agent-1", slots=3)
    yield agent
    agent.close()


def started(client: TestClient, user: dict, fake: FakeAgent) -> tuple[int, StartedTask]:
    exp = create_experiment(client, user, KEEP_ALL)
    [task] = fake.start_all()
    return exp["id"], task


def checkpoint(client: TestClient, task: StartedTask) -> str:
    """A checkpoint with a file where its experiment keeps them, as a trial reports it."""
    name = str(uuid_lib.uuid4())
    storage = storage_from_config(ctx_of(client.app).config.effective_checkpoint_storage().model_dump())
    with storage.store_path(name) as path:
        (path / "state.json").write_text("{}")
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "metadata": {"steps_completed": 1},
        "resources": {"state.json": "2"},
        "state": "STATE_COMPLETED",
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def link(client: TestClient, task: StartedTask, ckpt: str) -> None:
    info = {"checkpointUuid": ckpt, "trialId": task.trial_id, "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE"}
    r = post(client, "/api/v1/trial-source-info", {"trialSourceInfo": info}, task_header(task.token))
    assert r.status_code == 200, r.text


def links(app: FastAPI) -> set[tuple[int, str]]:
    S = models.TrialSourceInfo
    with ctx_of(app).db.read_session() as s:
        return {tuple(r) for r in s.execute(select(S.trial_id, S.checkpoint_uuid))}  # type: ignore[misc]


def test_deleting_an_experiment_deletes_the_links_of_its_trials_and_to_its_checkpoints(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    p_id, p = started(client, user, fake)  # takes ckpt_p
    _, r = started(client, user, fake)  # takes ckpt_r
    c_id, c = started(client, user, fake)  # uses both
    ckpt_p, ckpt_r = checkpoint(client, p), checkpoint(client, r)
    link(client, c, ckpt_p)
    link(client, c, ckpt_r)
    link(client, r, ckpt_p)
    for task in (p, r, c):
        fake.exit(task.allocation_id, 0)
    monkeypatch.setattr(experiment_purge, "BATCH", 1)  # one transaction per row
    deleter = app.state.experiment_deletion

    assert client.delete(f"/api/v1/experiments/{p_id}", headers=user).status_code == 200
    deleter.run_pending()
    assert client.get(f"/api/v1/experiments/{p_id}", headers=user).status_code == 404
    assert links(app) == {(c.trial_id, ckpt_r)}  # those naming ckpt_p went with it

    assert client.delete(f"/api/v1/experiments/{c_id}", headers=user).status_code == 200
    deleter.run_pending()
    assert links(app) == set()
    assert client.get(f"/api/v1/checkpoints/{ckpt_r}/metrics", headers=user).json() == {"metrics": []}


def test_the_purge_deletes_the_links_before_the_trials_and_checkpoints(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent
) -> None:
    _, p = started(client, user, fake)
    c_id, c = started(client, user, fake)
    ckpts = [checkpoint(client, p) for _ in range(3)]
    own = checkpoint(client, c)
    for ckpt in [*ckpts, own]:
        link(client, c, ckpt)
    link(client, p, own)
    done = experiment_purge.purge(ctx_of(app).db, c_id)
    assert done["trial_source_infos"] == 5  # its trial's four, and the producer's link to its checkpoint
    assert links(app) == set()
