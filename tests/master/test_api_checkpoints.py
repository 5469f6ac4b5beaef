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
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401


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


# -- GET /api/v1/checkpoints and /api/v1/checkpoints/{uuid}/download --------------------------------


def _master_storage(client: TestClient):
    from pedl.common.checkpoint_storage import storage_from_config

    return storage_from_config(client.app.state.ctx.config.effective_checkpoint_storage().model_dump())


def test_list_filters_by_experiment_trial_and_state(client: TestClient, user: dict, task: StartedTask) -> None:
    for steps in (1, 2, 3):
        post(client, "/api/v1/checkpoints", det_checkpoint(task, steps, f"ck-{steps}"), bearer(task.token))
    validate(client, task, 2, 0.5)
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]
    body = client.get(f"/api/v1/checkpoints?experimentId={exp_id}", headers=user).json()
    assert [c["uuid"] for c in body["checkpoints"]] == ["ck-1", "ck-2", "ck-3"]
    assert body["pagination"]["total"] == 3
    [two] = [c for c in body["checkpoints"] if c["uuid"] == "ck-2"]
    assert two["training"]["validationMetrics"]["avgMetrics"] == {"loss": 0.5}
    assert two["training"]["trialId"] == task.trial_id
    assert client.get(f"/api/v1/checkpoints?trialId={task.trial_id}&limit=2&offset=2",
                      headers=user).json()["checkpoints"][0]["uuid"] == "ck-3"
    newest = client.get("/api/v1/checkpoints?orderBy=ORDER_BY_DESC&limit=1", headers=user).json()
    assert newest["checkpoints"][0]["uuid"] == "ck-3" and newest["pagination"]["endIndex"] == 1
    assert client.get(f"/api/v1/checkpoints?experimentId={exp_id + 1}", headers=user).json()["checkpoints"] == []
    assert client.get("/api/v1/checkpoints?states=STATE_DELETED", headers=user).json()["checkpoints"] == []
    r = client.get("/api/v1/checkpoints?states=GONE", headers=user)
    assert r.status_code == 400 and "states" in r.json()["message"]


def test_download_streams_a_tar_of_the_files(client: TestClient, user: dict, task: StartedTask) -> None:
    import io
    import tarfile

    storage = _master_storage(client)
    with storage.store_path("dl-1") as path:
        (path / "weights.bin").write_bytes(bytes(range(256)) * 40)
        (path / "nested" / "deeper").mkdir(parents=True)
        (path / "nested" / "state.json").write_text('{"step": 3}')
    body = det_checkpoint(task, 3, "dl-1")
    body["resources"] = {k: str(v) for k, v in storage.resources("dl-1").items()}
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get("/api/v1/checkpoints/dl-1/download", headers=user)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/x-tar"
    assert int(r.headers["content-length"]) == len(r.content)
    assert r.headers["x-pedl-checkpoint-bytes"] == str(256 * 40 + 11)
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        names = {m.name: m for m in tar.getmembers()}
        assert set(names) == {"nested", "nested/deeper", "nested/state.json", "weights.bin"}
        assert names["nested/deeper"].isdir()
        assert tar.extractfile("weights.bin").read() == bytes(range(256)) * 40
        assert tar.extractfile("nested/state.json").read() == b'{"step": 3}'


def test_download_of_missing_or_deleted_checkpoints_is_404(client: TestClient, user: dict, task: StartedTask) -> None:
    assert client.get("/api/v1/checkpoints/nope/download", headers=user).status_code == 404
    post(client, "/api/v1/checkpoints", det_checkpoint(task, 1, "no-files"), bearer(task.token))
    r = client.get("/api/v1/checkpoints/no-files/download", headers=user)
    assert r.status_code == 404 and "has no files" in r.json()["message"]
    body = det_checkpoint(task, 2, "gone")
    body["state"] = "STATE_DELETED"
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get("/api/v1/checkpoints/gone/download", headers=user)
    assert r.status_code == 404 and "STATE_DELETED" in r.json()["message"]
    assert client.get("/api/v1/checkpoints/gone/download").status_code == 401


def test_download_reads_s3_checkpoints_from_the_bucket(client: TestClient, user: dict, task: StartedTask,
                                                      moto_endpoint: str) -> None:
    import io
    import tarfile

    import boto3

    from pedl.common.checkpoint_storage import S3Storage

    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket="dl-bucket")
    config = {"type": "s3", "bucket": "dl-bucket", "prefix": "p", "endpoint_url": moto_endpoint}
    storage = S3Storage("dl-bucket", prefix="p", endpoint_url=moto_endpoint)
    with storage.store_path("s3-ck") as path:
        (path / "model.pt").write_bytes(b"m" * 1000)
    body = det_checkpoint(task, 5, "s3-ck")
    body["storage"] = config
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get("/api/v1/checkpoints/s3-ck/download", headers=user)
    assert r.status_code == 200, r.text
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        assert tar.extractfile("model.pt").read() == b"m" * 1000
    # a bucket that does not exist is a 404 naming it, before any byte of tar
    body = det_checkpoint(task, 6, "s3-nobucket")
    body["storage"] = {**config, "bucket": "not-there"}
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get("/api/v1/checkpoints/s3-nobucket/download", headers=user)
    assert r.status_code == 404 and "'not-there' does not exist" in r.json()["message"]
