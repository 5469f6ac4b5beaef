"""Warm start: searcher.source_trial_id takes the source trial's latest completed checkpoint and
source_checkpoint_uuid the one named; the trials report it as warmStartCheckpointUuid and their
first run gets it as its latest checkpoint; an unknown or unusable source is a 400 naming the field."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.master.experiments.test_continuation import checkpoint, fake  # noqa: F401 (a fixture)
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, file_entry, post


def trials(client: TestClient, headers: dict, exp_id: int) -> list[dict]:
    return client.get(f"/api/v1/experiments/{exp_id}/trials", headers=headers).json()["trials"]


def with_searcher(**extra: object) -> str:
    fields = ", ".join(f"{k}: {v}" for k, v in extra.items())
    return SINGLE_CONFIG.replace("max_length: 10}", f"max_length: 10, {fields}}}")


@pytest.fixture
def source(client: TestClient, app: FastAPI, user: dict, fake: FakeAgent) -> tuple[int, str, str]:  # noqa: F811
    """A completed trial with two checkpoints: (its id, the first, the latest)."""
    create_experiment(client, user, SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 2}\n")  # both kept
    [task] = fake.start_all()
    first = checkpoint(client, app, task, 5)
    latest = checkpoint(client, app, task, 10)
    fake.exit(task.allocation_id, 0)
    return task.trial_id, first, latest


def test_source_trial_id_starts_from_its_latest_checkpoint(
    client: TestClient,
    user: dict,
    fake: FakeAgent,  # noqa: F811
    source: tuple[int, str, str],
) -> None:
    trial_id, _, latest = source
    exp = create_experiment(client, user, with_searcher(source_trial_id=trial_id))
    (trial,) = trials(client, user, exp["id"])
    assert trial["warmStartCheckpointUuid"] == latest and trial["latestCheckpointUuid"] == ""
    [task] = fake.start_all()
    assert task.message["env"]["DET_LATEST_CHECKPOINT"] == latest  # Determined's info.latest_checkpoint
    assert task.message["env"]["DET_STEPS_COMPLETED"] == "0"


def test_source_checkpoint_uuid_starts_from_that_checkpoint(
    client: TestClient,
    user: dict,
    fake: FakeAgent,  # noqa: F811
    source: tuple[int, str, str],
) -> None:
    _, first, _ = source
    exp = create_experiment(client, user, with_searcher(source_checkpoint_uuid=first))
    (trial,) = trials(client, user, exp["id"])
    assert trial["warmStartCheckpointUuid"] == first
    [task] = fake.start_all()
    assert task.message["env"]["DET_LATEST_CHECKPOINT"] == first


def test_a_trial_without_a_warm_start_reports_none(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    assert [t["warmStartCheckpointUuid"] for t in trials(client, user, exp["id"])] == [""]


def refused(client: TestClient, headers: dict, config: str) -> dict[str, str]:
    body = {
        "activate": True,
        "config": config,
        "modelDefinition": [file_entry("train.py", b"print(1)\n")],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    r = post(client, "/api/v1/experiments", body, headers)
    assert r.status_code == 400, r.text
    return {f["field"]: f["message"] for f in r.json()["fields"]}


def test_an_unknown_or_unusable_source_is_refused_naming_the_field(
    client: TestClient,
    user: dict,
    fake: FakeAgent,  # noqa: F811
) -> None:
    assert "no trial 9999" in refused(client, user, with_searcher(source_trial_id=9999))["searcher.source_trial_id"]
    assert (
        "no checkpoint"
        in refused(client, user, with_searcher(source_checkpoint_uuid="nope"))["searcher.source_checkpoint_uuid"]
    )
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = fake.start_all()  # running, no checkpoint yet
    assert (
        "no completed checkpoint"
        in refused(client, user, with_searcher(source_trial_id=task.trial_id))["searcher.source_trial_id"]
    )
