"""Checkpoints over the API: a task reports one (det's bare shape and pedl's wrapped one), and
describe / list fill in `training` from the trial and its validation at the same step."""

from __future__ import annotations

import uuid

import pytest
from fastapi.testclient import TestClient

from tests.master.fakes import (
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    post,
)


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def det_checkpoint(task: StartedTask, steps: int, ckpt_uuid: str | None = None) -> dict:
    """What determined.core posts: v1Checkpoint with `training: {}`."""
    return {"metadata": {"steps_completed": steps, "framework": "torch"},
            "resources": {"model.pt": "1024", "metadata.json": "27"}, "state": "STATE_COMPLETED",
            "training": {}, "uuid": ckpt_uuid or str(uuid.uuid4()), "allocationId": task.allocation_id,
            "reportTime": "2025-01-01T00:00:00+00:00", "storageId": None, "taskId": task.task_id}


def validate(client: TestClient, task: StartedTask, steps: int, loss: float) -> None:
    body = {"group": "validation", "metrics": {"trialId": task.trial_id, "trialRunId": 1, "stepsCompleted": steps,
                                               "metrics": {"avgMetrics": {"loss": loss}}}}
    assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, bearer(task.token)).status_code == 200


def describe(client: TestClient, headers: dict, ckpt_uuid: str) -> dict:
    r = client.get(f"/api/v1/checkpoints/{ckpt_uuid}", headers=headers)
    assert r.status_code == 200
    return r.json()["checkpoint"]


def test_report_and_describe_fills_training(client: TestClient, user: dict, task: StartedTask) -> None:
    validate(client, task, 10, 0.25)
    body = det_checkpoint(task, 10)
    r = post(client, "/api/v1/checkpoints", body, bearer(task.token))
    assert r.status_code == 200, r.text
    c = describe(client, user, body["uuid"])
    assert c["uuid"] == body["uuid"]
    assert c["state"] == "STATE_COMPLETED"
    assert c["metadata"]["steps_completed"] == 10 and c["metadata"]["framework"] == "torch"
    assert c["resources"] == {"model.pt": "1024", "metadata.json": "27"}
    t = c["training"]
    assert t["trialId"] == task.trial_id
    assert t["experimentId"] > 0
    assert t["experimentConfig"]["searcher"]["metric"] == "loss"
    assert t["hparams"] == {}
    assert t["validationMetrics"]["avgMetrics"] == {"loss": 0.25}
    assert t["searcherMetric"] == 0.25
    assert c["taskId"] == task.task_id and c["allocationId"] == task.allocation_id


def test_validation_at_other_steps_is_not_attached(client: TestClient, user: dict, task: StartedTask) -> None:
    validate(client, task, 5, 0.9)
    body = det_checkpoint(task, 10)
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    t = describe(client, user, body["uuid"])["training"]
    assert t["validationMetrics"]["avgMetrics"] == {}
    assert "searcherMetric" not in t


def test_wrapped_report_from_pedl_core(client: TestClient, user: dict, task: StartedTask) -> None:
    ckpt = det_checkpoint(task, 4)
    ckpt["training"] = {"trialId": task.trial_id}
    r = post(client, "/api/v1/checkpoints", {"checkpoint": ckpt}, bearer(task.token))
    assert r.status_code == 200
    assert describe(client, user, ckpt["uuid"])["training"]["trialId"] == task.trial_id


def test_checkpoint_shows_in_workloads_and_trial(client: TestClient, user: dict, task: StartedTask) -> None:
    body = det_checkpoint(task, 7)
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["checkpointCount"] == 1
    work = client.get(f"/api/v1/trials/{task.trial_id}/workloads", headers=user).json()["workloads"]
    [ck] = [w["checkpoint"] for w in work if "checkpoint" in w]
    assert ck["uuid"] == body["uuid"] and ck["totalBatches"] == 7 and ck["endTime"]
    assert ck["state"] in ("STATE_ACTIVE", "STATE_COMPLETED", "STATE_ERROR", "STATE_DELETED")


def test_restart_resumes_from_the_latest_checkpoint(client: TestClient, user: dict, task: StartedTask,
                                                     agent: FakeAgent) -> None:
    body = det_checkpoint(task, 6)
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    agent.exit(task.allocation_id, 1, "crashed")
    [again] = agent.start_all()
    assert again.message["env"]["DET_LATEST_CHECKPOINT"] == body["uuid"]
    assert again.message["env"]["DET_STEPS_COMPLETED"] == "6"


def test_retried_report_is_idempotent(client: TestClient, user: dict, task: StartedTask) -> None:
    body = det_checkpoint(task, 3, "same-uuid")
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["checkpointCount"] == 1


def test_same_uuid_from_another_trial_is_400(client: TestClient, user: dict, task: StartedTask) -> None:
    post(client, "/api/v1/checkpoints", det_checkpoint(task, 3, "shared"), bearer(task.token))
    r = post(client, "/api/v1/checkpoints", {"uuid": "shared", "metadata": {"steps_completed": 1}}, user)
    assert r.status_code == 400
    assert "checkpoint.uuid" in r.json()["message"]


def test_experiment_checkpoints_sorted_by_searcher_metric(client: TestClient, user: dict,
                                                          task: StartedTask) -> None:
    for steps, loss in ((10, 0.5), (20, 0.1), (30, 0.3)):
        validate(client, task, steps, loss)
        post(client, "/api/v1/checkpoints", det_checkpoint(task, steps, f"ck-{steps}"), bearer(task.token))
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]
    url = f"/api/v1/experiments/{exp_id}/checkpoints"
    every = client.get(f"{url}?sortByAttr=SORT_BY_END_TIME", headers=user).json()["checkpoints"]
    assert {c["uuid"] for c in every} == {"ck-10", "ck-20", "ck-30"}
    best = client.get(f"{url}?limit=2&sortByAttr=SORT_BY_SEARCHER_METRIC", headers=user).json()["checkpoints"]
    assert [c["uuid"] for c in best] == ["ck-20", "ck-30"]
    for c in best:
        assert c["training"]["experimentConfig"]["searcher"]["metric"] == "loss"


def test_unknown_checkpoint_is_404(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/checkpoints/does-not-exist", headers=user).status_code == 404
