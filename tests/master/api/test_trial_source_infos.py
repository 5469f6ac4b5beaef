"""Trial source infos over the API, as Determined's SDK sends them: a task reports that its trial uses a
checkpoint or a model version (POST /trial-source-info, the task token of that trial only, idempotent),
and GET /checkpoints/{uuid}/metrics and /models/{name}/versions/{n}/metrics answer the reports of those
trials, never those of the trial that took the checkpoint."""

from __future__ import annotations

import json
import uuid as uuid_lib
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.config.master_config import MasterConfig
from pedl.master.db import models
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    ctx_of,
    login,
    post,
    task_header,
)

INFERENCE, FINE_TUNING = "TRIAL_SOURCE_INFO_TYPE_INFERENCE", "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING"


@dataclass
class Trials:
    """`producer` took the checkpoints; `first` and `second` (another experiment) use them."""

    producer: StartedTask
    first: StartedTask
    second: StartedTask


@pytest.fixture
def master_config(master_config: MasterConfig) -> MasterConfig:
    # the fake agent runs no checkpoint GC task: a delete here is the master's own
    return master_config.model_copy(update={"checkpoint_gc_tasks": False})


@pytest.fixture
def trials(app: FastAPI, client: TestClient, user: dict) -> Iterator[Trials]:
    agent = FakeAgent(app, "agent-tsi", slots=3)
    create_experiment(client, user, SINGLE_CONFIG)
    create_experiment(client, user, GRID_CONFIG)
    producer, first, second = sorted(agent.start_all(), key=lambda t: t.trial_id)
    yield Trials(producer, first, second)
    agent.close()


@pytest.fixture
def bob(client: TestClient, admin: dict) -> dict:
    body = {
        "user": {"username": "bob", "admin": False, "active": True},
        "password": client_hash("pw-bob"),
        "isHashed": True,
    }
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    return bearer(login(client, "bob", "pw-bob"))


def checkpoint(client: TestClient, task: StartedTask, steps: int) -> str:
    name = str(uuid_lib.uuid4())
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "training": {},
        "metadata": {"steps_completed": steps},
        "resources": {"model.pt": "10"},
        "state": "STATE_COMPLETED",
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def report(client: TestClient, task: StartedTask, group: str, steps: int, values: dict) -> None:
    body = {
        "group": group,
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": values},
        },
    }
    assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, bearer(task.token)).status_code == 200


def link(
    client: TestClient,
    task: StartedTask,
    ckpt: str,
    kind: str = INFERENCE,
    *,
    trial_id: int | None = None,
    headers: dict | None = None,
    **model: int,
):
    """What core_context.experimental.report_task_using_checkpoint (and _model_version) send."""
    info = {"checkpointUuid": ckpt, "trialId": trial_id or task.trial_id, "trialSourceInfoType": kind, **model}
    return post(
        client,
        "/api/v1/trial-source-info",
        {"trialSourceInfo": info},
        task_header(task.token) if headers is None else headers,
    )


def reports(client: TestClient, headers: dict, path: str, **params) -> list[tuple[int, str, int, dict]]:
    r = client.get(path, params=params, headers=headers)
    assert r.status_code == 200, r.text
    return [(m["trialId"], m["group"], m["totalBatches"], m["metrics"]) for m in r.json()["metrics"]]


def rows(client: TestClient) -> list[tuple]:
    S = models.TrialSourceInfo
    with ctx_of(client.app).db.read_session() as s:
        return [
            tuple(r)
            for r in s.execute(
                select(S.trial_id, S.checkpoint_uuid, S.type, S.model_id, S.model_version).order_by(S.id)
            )
        ]


def register(client: TestClient, headers: dict, model: str, ckpt: str) -> dict:
    r = post(client, f"/api/v1/models/{model}/versions", {"checkpointUuid": ckpt}, headers)
    assert r.status_code == 200, r.text
    return r.json()["modelVersion"]


# -- POST /trial-source-info ------------------------------------------------------------------------


def test_a_report_answers_what_det_reads_and_is_idempotent(client: TestClient, trials: Trials) -> None:
    ckpt = checkpoint(client, trials.producer, 5)
    for _ in range(2):
        r = link(client, trials.first, ckpt)
        assert r.status_code == 200, r.text
        assert r.json() == {"trialId": trials.first.trial_id, "checkpointUuid": ckpt}
    assert link(client, trials.first, ckpt, FINE_TUNING).status_code == 200  # another type: another row
    assert rows(client) == [
        (trials.first.trial_id, ckpt, "INFERENCE", None, None),
        (trials.first.trial_id, ckpt, "FINE_TUNING", None, None),
    ]


def test_a_report_is_refused_naming_what_is_wrong(client: TestClient, user: dict, trials: Trials) -> None:
    ckpt = checkpoint(client, trials.producer, 5)
    other = checkpoint(client, trials.producer, 6)
    assert post(client, "/api/v1/models", {"name": "m"}, user).status_code == 200
    version = register(client, user, "m", ckpt)
    unknown = str(uuid_lib.uuid4())
    r = link(client, trials.first, unknown)
    assert r.status_code == 404 and unknown in r.json()["message"]
    assert r.json()["fields"][0]["field"] == "trialSourceInfo.checkpointUuid"
    cases = [
        (
            link(client, trials.first, ckpt, "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED"),
            400,
            "trialSourceInfo.trialSourceInfoType",
        ),
        (link(client, trials.first, ckpt, "INFERENCE"), 400, "trialSourceInfo.trialSourceInfoType"),
        (link(client, trials.first, ckpt, modelId=version["model"]["id"]), 400, "trialSourceInfo.modelVersion"),
        (link(client, trials.first, ckpt, modelVersion=1), 400, "trialSourceInfo.modelId"),
        (
            link(client, trials.first, ckpt, modelId=version["model"]["id"], modelVersion=9),
            404,
            "trialSourceInfo.modelVersion",
        ),
        (
            link(client, trials.first, other, modelId=version["model"]["id"], modelVersion=1),
            400,
            "trialSourceInfo.checkpointUuid",
        ),
        (
            link(client, trials.first, ckpt, modelId=version["model"]["id"] + 100, modelVersion=1),
            404,
            "trialSourceInfo.modelVersion",
        ),
    ]
    for r, status, field in cases:
        assert r.status_code == status and r.json()["fields"][0]["field"] == field, r.text
    r = post(
        client,
        "/api/v1/trial-source-info",
        {"trialSourceInfo": {"checkpointUuid": ckpt}},
        task_header(trials.first.token),
    )
    assert r.status_code == 400 and "trialId" in r.text
    # only the task token of that trial
    assert link(client, trials.first, ckpt, headers=user).status_code == 403
    assert link(client, trials.first, ckpt, trial_id=trials.second.trial_id).status_code == 403
    assert rows(client) == []


def test_a_model_version_given_again_replaces_the_one_recorded(client: TestClient, user: dict, trials: Trials) -> None:
    ckpt = checkpoint(client, trials.producer, 5)
    for name in ("a", "b"):
        assert post(client, "/api/v1/models", {"name": name}, user).status_code == 200
    a, b = register(client, user, "a", ckpt), register(client, user, "b", ckpt)
    first = trials.first.trial_id
    assert link(client, trials.first, ckpt, modelId=a["model"]["id"], modelVersion=1).status_code == 200
    assert link(client, trials.first, ckpt).status_code == 200  # the checkpoint alone: the version kept
    assert rows(client) == [(first, ckpt, "INFERENCE", a["model"]["id"], 1)]
    assert link(client, trials.first, ckpt, modelId=b["model"]["id"], modelVersion=1).status_code == 200
    assert rows(client) == [(first, ckpt, "INFERENCE", b["model"]["id"], 1)]


# -- GET /checkpoints/{uuid}/metrics ----------------------------------------------------------------


def test_checkpoint_metrics_are_the_reports_of_the_trials_that_used_it(
    client: TestClient, user: dict, bob: dict, trials: Trials
) -> None:
    p, first, second = trials.producer, trials.first, trials.second
    report(client, p, "training", 1, {"loss": 0.9})
    ckpt = checkpoint(client, p, 1)
    path = f"/api/v1/checkpoints/{ckpt}/metrics"
    assert reports(client, user, path) == []  # the producer's own reports are not the checkpoint's
    report(client, first, "training", 1, {"loss": 0.5})
    report(client, first, "training", 2, {"loss": 0.4})
    report(client, first, "validation", 2, {"loss": 0.45})
    report(client, first, "inference", 2, {"acc": 0.7})
    report(client, second, "validation", 3, {"loss": 0.3})
    assert link(client, first, ckpt).status_code == 200
    assert link(client, second, ckpt, FINE_TUNING).status_code == 200
    a, b = first.trial_id, second.trial_id
    # what the SDK asks: INFERENCE links, one group (any user reads, and any live task)
    for headers in (bob, bearer(p.token)):
        assert reports(client, headers, path, trialSourceInfoType=INFERENCE, metricGroup="training") == [
            (a, "training", 1, {"avg_metrics": {"loss": 0.5}}),
            (a, "training", 2, {"avg_metrics": {"loss": 0.4}}),
        ]
    assert reports(client, user, path, trialSourceInfoType=INFERENCE, metricGroup="validation") == [
        (a, "validation", 2, {"validation_metrics": {"loss": 0.45}})
    ]
    assert reports(client, user, path, trialSourceInfoType=FINE_TUNING, metricGroup="validation") == [
        (b, "validation", 3, {"validation_metrics": {"loss": 0.3}})
    ]
    # every group: training, validation, then the others; validations also under avg_metrics
    assert [(t, g, s) for t, g, s, _ in reports(client, user, path, trialSourceInfoType=INFERENCE)] == [
        (a, "training", 1),
        (a, "training", 2),
        (a, "validation", 2),
        (a, "inference", 2),
    ]
    every = reports(client, user, path)  # no type (or UNSPECIFIED): every linked trial, in id order
    assert every == reports(client, user, path, trialSourceInfoType="TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED")
    assert [(t, g, s) for t, g, s, _ in every] == [
        (a, "training", 1),
        (a, "training", 2),
        (a, "validation", 2),
        (a, "inference", 2),
        (b, "validation", 3),
    ]
    assert every[2][3] == {"validation_metrics": {"loss": 0.45}, "avg_metrics": {"loss": 0.45}}
    assert reports(client, user, path, metricGroup="nothing") == []


def test_checkpoint_metrics_refusals(client: TestClient, user: dict, trials: Trials) -> None:
    unknown = str(uuid_lib.uuid4())
    r = client.get(f"/api/v1/checkpoints/{unknown}/metrics", headers=user)
    assert r.status_code == 404 and unknown in r.json()["message"]
    ckpt = checkpoint(client, trials.producer, 2)
    assert client.get(f"/api/v1/checkpoints/{ckpt}/metrics", headers=user).json() == {"metrics": []}
    r = client.get(f"/api/v1/checkpoints/{ckpt}/metrics?trialSourceInfoType=NOPE", headers=user)
    assert r.status_code == 400 and "trialSourceInfoType" in r.text
    r = client.get(f"/api/v1/checkpoints/{ckpt}/metrics", params={"metricGroup": "g" * 65}, headers=user)
    assert r.status_code == 400 and "metricGroup" in r.text
    assert client.get(f"/api/v1/checkpoints/{ckpt}/metrics").status_code == 401


def test_a_deleted_checkpoint_keeps_its_links(client: TestClient, user: dict, trials: Trials) -> None:
    ckpt = checkpoint(client, trials.producer, 2)
    report(client, trials.first, "validation", 1, {"loss": 0.5})
    assert link(client, trials.first, ckpt).status_code == 200
    r = client.request("DELETE", "/api/v1/checkpoints", content=json.dumps({"checkpointUuids": [ckpt]}), headers=user)
    assert r.status_code == 200, r.text
    assert client.get(f"/api/v1/checkpoints/{ckpt}", headers=user).json()["checkpoint"]["state"] == "STATE_DELETED"
    assert reports(client, user, f"/api/v1/checkpoints/{ckpt}/metrics") == [
        (trials.first.trial_id, "validation", 1, {"validation_metrics": {"loss": 0.5}, "avg_metrics": {"loss": 0.5}})
    ]
    assert link(client, trials.second, ckpt).status_code == 200  # as in Determined: the row is still there


# -- GET /models/{name}/versions/{n}/metrics -------------------------------------------------------


def test_version_metrics_are_the_reports_of_the_trials_that_used_the_version(
    client: TestClient, user: dict, bob: dict, trials: Trials
) -> None:
    ckpt, other = checkpoint(client, trials.producer, 1), checkpoint(client, trials.producer, 2)
    assert post(client, "/api/v1/models", {"name": "my model"}, user).status_code == 200
    v1, v2 = register(client, user, "my%20model", ckpt), register(client, user, "my%20model", other)
    model_id = v1["model"]["id"]
    report(client, trials.first, "validation", 4, {"loss": 0.25})
    report(client, trials.second, "validation", 5, {"loss": 0.2})
    assert link(client, trials.first, ckpt, modelId=model_id, modelVersion=v1["version"]).status_code == 200
    assert link(client, trials.second, ckpt).status_code == 200  # the checkpoint, not the version
    a, b = trials.first.trial_id, trials.second.trial_id
    shown = [(a, "validation", 4, {"validation_metrics": {"loss": 0.25}})]
    for name in ("my%20model", str(model_id)):  # by name, or by id
        path = f"/api/v1/models/{name}/versions/1/metrics"
        assert reports(client, bob, path, trialSourceInfoType=INFERENCE, metricGroup="validation") == shown
    assert reports(client, user, "/api/v1/models/my%20model/versions/1/metrics", trialSourceInfoType=FINE_TUNING) == []
    assert reports(client, user, f"/api/v1/models/my%20model/versions/{v2['version']}/metrics") == []
    # the checkpoint's reports: both trials, the one that named the version too
    assert [t for t, *_ in reports(client, user, f"/api/v1/checkpoints/{ckpt}/metrics", metricGroup="validation")] == [
        a,
        b,
    ]
    for path in ("/api/v1/models/nobody/versions/1/metrics", "/api/v1/models/my%20model/versions/7/metrics"):
        assert client.get(path, headers=user).status_code == 404, path
    r = client.get("/api/v1/models/my%20model/versions/1/metrics?trialSourceInfoType=NOPE", headers=user)
    assert r.status_code == 400 and "trialSourceInfoType" in r.text


def test_deleting_the_version_or_model_keeps_the_link_to_the_checkpoint(
    client: TestClient, user: dict, trials: Trials
) -> None:
    ckpt = checkpoint(client, trials.producer, 1)
    assert post(client, "/api/v1/models", {"name": "m"}, user).status_code == 200
    model_id = register(client, user, "m", ckpt)["model"]["id"]
    report(client, trials.first, "validation", 4, {"loss": 0.25})
    assert link(client, trials.first, ckpt, modelId=model_id, modelVersion=1).status_code == 200
    assert client.delete("/api/v1/models/m/versions/1", headers=user).status_code == 200
    assert client.get("/api/v1/models/m/versions/1/metrics", headers=user).status_code == 404
    assert rows(client) == [(trials.first.trial_id, ckpt, "INFERENCE", None, None)]
    # the next version 1 is another version: the old link is not its
    assert register(client, user, "m", ckpt)["version"] == 1
    assert reports(client, user, "/api/v1/models/m/versions/1/metrics") == []
    assert [t for t, *_ in reports(client, user, f"/api/v1/checkpoints/{ckpt}/metrics")] == [trials.first.trial_id]
    # deleting the model clears the links to its versions the same way
    assert link(client, trials.second, ckpt, modelId=model_id, modelVersion=1).status_code == 200
    assert client.delete("/api/v1/models/m", headers=user).status_code == 200
    assert rows(client) == [
        (trials.first.trial_id, ckpt, "INFERENCE", None, None),
        (trials.second.trial_id, ckpt, "INFERENCE", None, None),
    ]
