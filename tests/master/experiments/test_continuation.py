"""Continuing an ended single-trial experiment: the override is merged into its config (not its
original config), the experiment is ACTIVE again and its trial gets a new run from its latest
checkpoint with restarts from zero; what Determined refuses is refused naming why, changing nothing."""

from __future__ import annotations

import json
import uuid as uuid_lib
from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.common.checkpoint_storage import storage_from_config
from pedl.config.master_config import MasterConfig
from pedl.master.experiments.continuation import merge
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    ctx_of,
    post,
)


@pytest.fixture
def master_config(master_config: MasterConfig) -> MasterConfig:
    # the fake agent runs no checkpoint GC task (the master collects itself, as before there were GC tasks)
    return master_config.model_copy(update={"checkpoint_gc_tasks": False})


@pytest.fixture
def fake(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    agent = FakeAgent(app, "agent-1", slots=1)
    yield agent
    agent.close()


def checkpoint(client: TestClient, app: FastAPI, task: StartedTask, steps: int) -> str:
    name = str(uuid_lib.uuid4())
    store = storage_from_config(ctx_of(app).config.effective_checkpoint_storage().model_dump())
    with store.store_path(name) as path:
        (path / "state.json").write_text(f'{{"step": {steps}}}')
    r = post(
        client,
        "/api/v1/checkpoints",
        {
            "uuid": name,
            "allocationId": task.allocation_id,
            "taskId": task.task_id,
            "metadata": {"steps_completed": steps},
            "resources": store.resources(name),
            "state": "STATE_COMPLETED",
        },
        bearer(task.token),
    )
    assert r.status_code == 200, r.text
    return name


def cont(client: TestClient, headers: dict, exp_id: int, override: str | None = "{}\n"):
    return post(client, "/api/v1/experiments/continue", {"id": exp_id, "overrideConfig": override}, headers)


def shown(client: TestClient, headers: dict, exp_id: int) -> dict:
    got = client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()
    trials = client.get(f"/api/v1/experiments/{exp_id}/trials", headers=headers).json()["trials"]
    return {**got["experiment"], "config": got["config"], "trials": trials}


def test_a_completed_experiment_trains_on_from_its_latest_checkpoint(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 1}\n")
    [first] = fake.start_all()
    checkpoint(client, app, first, 5)
    latest = checkpoint(client, app, first, 10)
    fake.exit(first.allocation_id, 0)
    before = shown(client, user, exp["id"])
    assert before["state"] == "STATE_COMPLETED" and before["config"]["searcher"]["max_length"]["batches"] == 10

    r = cont(client, user, exp["id"], "searcher:\n  max_length:\n    batches: 20\n")  # as det e continue sends it
    assert r.status_code == 200, r.text
    answered = r.json()["experiment"]
    # active again: its trial is queued, or already placed on the free agent by a scheduling pass that ran first
    assert answered["state"] in ("STATE_QUEUED", "STATE_STARTING") and answered["endTime"] is None
    assert answered["config"]["searcher"]["max_length"]["batches"] == 20
    assert answered["originalConfig"] == before["originalConfig"]  # what the user sent, as Determined keeps it

    [second] = fake.start_all()
    env = second.message["env"]
    assert second.trial_id == first.trial_id and second.allocation_id != first.allocation_id
    assert (env["DET_LATEST_CHECKPOINT"], env["DET_STEPS_COMPLETED"], env["DET_TRIAL_RUN_ID"]) == (latest, "10", "2")
    assert json.loads(env["DET_EXPERIMENT_CONFIG"])["searcher"]["max_length"]["batches"] == 20
    [trial] = shown(client, user, exp["id"])["trials"]
    assert trial["state"] == "STATE_RUNNING" and trial["restarts"] == 0 and trial["endTime"] is None

    fake.exit(second.allocation_id, 0)
    after = shown(client, user, exp["id"])
    assert after["state"] == "STATE_COMPLETED" and after["progress"] == 1.0
    assert (
        after["startTime"] == before["startTime"]
        and after["trials"][0]["startTime"] == before["trials"][0]["startTime"]
    )


def test_an_errored_experiment_is_fixed_by_its_override_and_restarts_count_again(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent
) -> None:
    config = SINGLE_CONFIG + "max_restarts: 1\nhyperparameters: {sigma: {type: const, val: -1}}\n"
    exp = create_experiment(client, user, config)
    for _ in range(2):  # the run and its one restart fail
        [task] = fake.start_all()
        assert json.loads(task.message["env"]["DET_HPARAMS"]) == {"sigma": -1}
        fake.exit(task.allocation_id, 1, "crashed")
    assert shown(client, user, exp["id"])["state"] == "STATE_ERROR"
    assert shown(client, user, exp["id"])["trials"][0]["restarts"] == 1

    assert cont(client, user, exp["id"], "hyperparameters:\n  sigma: 1.0\n").status_code == 200
    [task] = fake.start_all()
    assert json.loads(task.message["env"]["DET_HPARAMS"]) == {"sigma": 1.0}
    assert task.message["env"]["DET_LATEST_CHECKPOINT"] == ""  # none was reported: from the start
    assert shown(client, user, exp["id"])["trials"][0]["restarts"] == 0
    fake.exit(task.allocation_id, 0)
    assert shown(client, user, exp["id"])["state"] == "STATE_COMPLETED"


def test_a_killed_experiment_continues_without_an_override(client: TestClient, user: dict, fake: FakeAgent) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    fake.start_all()
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    for m in fake.messages():
        if m["type"] == "kill_task":
            fake.exit(m["allocation_id"], -15, "killed")
    assert shown(client, user, exp["id"])["state"] == "STATE_CANCELED"
    assert cont(client, user, exp["id"], None).status_code == 200  # det sends "{}\n"; other clients nothing
    # active, its trial queued (or placed already by the master's own loop)
    assert shown(client, user, exp["id"])["state"] in ("STATE_QUEUED", "STATE_STARTING")
    assert len(fake.start_all()) == 1


@pytest.mark.parametrize(
    ("override", "named"),
    [
        ("searcher:\n  name: grid\n", "searcher.name"),
        ("project: other\n", "overrideConfig.project"),
        ("workspace: other\n", "overrideConfig.workspace"),
        ("checkpoint_storage:\n  host_path: /elsewhere\n", "checkpoint_storage.host_path"),
        ("max_restarts: -1\n", "max_restarts"),
        ("[1, 2]\n", "overrideConfig"),
        ("searcher: {max_length: {batches: 0}}\n", "searcher.max_length"),
        (": : :\n", "overrideConfig"),
    ],
)
def test_bad_overrides_are_refused_naming_the_field(
    client: TestClient, user: dict, fake: FakeAgent, override: str, named: str
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = fake.start_all()
    fake.exit(task.allocation_id, 0)
    before = shown(client, user, exp["id"])
    r = cont(client, user, exp["id"], override)
    assert r.status_code == 400 and named in r.json()["message"], r.text
    assert shown(client, user, exp["id"]) == before


def test_what_determined_refuses_is_refused(client: TestClient, user: dict, admin: dict, fake: FakeAgent) -> None:
    running = create_experiment(client, user, SINGLE_CONFIG)
    fake.start_all()
    r = cont(client, user, running["id"])
    # named as the API shows it: the trial runs on the fake agent
    assert r.status_code == 400 and "is RUNNING" in r.json()["message"] and "ended" in r.json()["message"]

    grid = create_experiment(client, user, GRID_CONFIG, activate=False)
    assert post(client, f"/api/v1/experiments/{grid['id']}/kill", None, user).status_code == 200
    r = cont(client, user, grid["id"])
    assert r.status_code == 400 and "grid searcher" in r.json()["message"]
    assert shown(client, user, grid["id"])["state"] == "STATE_CANCELED"

    theirs = create_experiment(client, admin, SINGLE_CONFIG, activate=False)
    assert post(client, f"/api/v1/experiments/{theirs['id']}/kill", None, admin).status_code == 200
    assert cont(client, user, theirs["id"]).status_code == 403
    assert shown(client, admin, theirs["id"])["state"] == "STATE_CANCELED"
    assert cont(client, user, 999_999).status_code == 404


def test_merge_replaces_lengths_and_typed_hyperparameters_whole() -> None:
    base = {
        "searcher": {"name": "single", "max_length": {"batches": 10, "epochs": None}},
        "hyperparameters": {"lr": {"type": "const", "val": 0.1}, "opt": {"m": {"type": "const", "val": 1}}},
        "resources": {"slots_per_trial": 1, "priority": 42},
    }
    out = merge(
        base,
        {
            "searcher": {"max_length": {"epochs": 2}},
            "hyperparameters": {"lr": {"type": "categorical", "vals": [1, 2]}, "opt": {"m": 3}},
            "resources": {"priority": 7},
        },
    )
    assert out["searcher"] == {"name": "single", "max_length": {"epochs": 2}}
    assert out["hyperparameters"] == {"lr": {"type": "categorical", "vals": [1, 2]}, "opt": {"m": 3}}
    assert out["resources"] == {"slots_per_trial": 1, "priority": 7}
    assert base["resources"]["priority"] == 42  # the base is not changed
