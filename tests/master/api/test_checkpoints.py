"""Checkpoints over the API: a task reports one (det's bare shape and pedl's wrapped one), describe
and list fill in `training` from the trial and its validation at the same step, and download streams
the files. Registration takes only the task token of the checkpoint's own trial and never a storage:
the files are where the experiment's storage says, inside the master's storage roots."""

from __future__ import annotations

import io
import logging
import os
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from pedl.master.checkpoints.to_wire import storage_id
from pedl.master.db import models
from pedl.master.lifecycle.states import CheckpointState
from tests.master.factories import legacy_checkpoint
from tests.master.fakes import (
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    ctx_of,
    post,
)
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401

S3_BUCKETS = ("dl-bucket", "not-there")


@pytest.fixture
def master_config(master_config: MasterConfig, tmp_path: Path, moto_server: str) -> MasterConfig:
    """The shared config, with the buckets of the s3 tests (on moto) allowed as storage roots."""
    security = master_config.security.model_copy(
        update={
            "checkpoint_storage_roots": [f"s3://{bucket}" for bucket in S3_BUCKETS],
            "s3_endpoint_urls": [moto_server],
        }
    )
    return master_config.model_copy(update={"security": security})


def uid(name: str) -> str:
    """A real UUID, the same for the same name, so a test can speak of `uid("best")`."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pedl-test/{name}"))


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def det_checkpoint(task: StartedTask, steps: int, ckpt_uuid: str | None = None) -> dict:
    """What determined.core posts: v1Checkpoint with `training: {}` (`ckpt_uuid` names a `uid`)."""
    return {
        "metadata": {"steps_completed": steps, "framework": "torch"},
        "resources": {"model.pt": "1024", "metadata.json": "27"},
        "state": "STATE_COMPLETED",
        "training": {},
        "uuid": uid(ckpt_uuid) if ckpt_uuid else str(uuid.uuid4()),
        "allocationId": task.allocation_id,
        "reportTime": "2025-01-01T00:00:00+00:00",
        "storageId": None,
        "taskId": task.task_id,
    }


def validate(client: TestClient, task: StartedTask, steps: int, loss: float) -> None:
    body = {
        "group": "validation",
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": {"loss": loss}},
        },
    }
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


def test_workloads_of_a_step_put_the_ones_with_a_state_first(client: TestClient, user: dict, task: StartedTask) -> None:
    """det's `experiment describe` merges a step's workloads into one row whose State column is the
    first one's, and only a checkpoint or a validation has a state."""
    h = bearer(task.token)
    for steps in (3, 5):
        body = {
            "group": "training",
            "metrics": {
                "trialId": task.trial_id,
                "trialRunId": 1,
                "stepsCompleted": steps,
                "metrics": {"avgMetrics": {"loss": 1.0}},
            },
        }
        assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, h).status_code == 200
    validate(client, task, 5, 0.5)
    post(client, "/api/v1/checkpoints", det_checkpoint(task, 5), h)
    work = client.get(f"/api/v1/trials/{task.trial_id}/workloads", headers=user).json()["workloads"]
    assert [(kind, w[kind]["totalBatches"]) for w in work for kind in w] == [
        ("training", 3),
        ("checkpoint", 5),
        ("validation", 5),
        ("training", 5),
    ]


def test_restart_resumes_from_the_latest_checkpoint(
    client: TestClient, user: dict, task: StartedTask, agent: FakeAgent
) -> None:
    body = det_checkpoint(task, 6)
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    agent.exit(task.allocation_id, 1, "crashed")
    [again] = agent.start_all()
    assert again.message["env"]["DET_LATEST_CHECKPOINT"] == body["uuid"]
    assert again.message["env"]["DET_STEPS_COMPLETED"] == "6"


def test_retried_report_is_idempotent(client: TestClient, user: dict, task: StartedTask) -> None:
    body = det_checkpoint(task, 3, "same")
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["checkpointCount"] == 1


@pytest.fixture
def other(app: FastAPI, client: TestClient, user: dict, task: StartedTask) -> Iterator[StartedTask]:
    """A running task of another experiment, on an agent of its own."""
    agent2 = FakeAgent(app, "agent-2", slots=1)
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent2.start_all()
    yield started
    agent2.close()


def test_same_uuid_from_another_trial_is_400(client: TestClient, task: StartedTask, other: StartedTask) -> None:
    assert post(client, "/api/v1/checkpoints", det_checkpoint(task, 3, "shared"), bearer(task.token)).status_code == 200
    r = post(client, "/api/v1/checkpoints", det_checkpoint(other, 1, "shared"), bearer(other.token))
    assert r.status_code == 400
    assert "checkpoint.uuid" in r.json()["message"]


def test_experiment_checkpoints_sorted_by_searcher_metric(client: TestClient, user: dict, task: StartedTask) -> None:
    for steps, loss in ((10, 0.5), (20, 0.1), (30, 0.3)):
        validate(client, task, steps, loss)
        post(client, "/api/v1/checkpoints", det_checkpoint(task, steps, f"ck-{steps}"), bearer(task.token))
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]
    url = f"/api/v1/experiments/{exp_id}/checkpoints"
    every = client.get(f"{url}?sortByAttr=SORT_BY_END_TIME", headers=user).json()["checkpoints"]
    assert {c["uuid"] for c in every} == {uid("ck-10"), uid("ck-20"), uid("ck-30")}
    best = client.get(f"{url}?limit=2&sortByAttr=SORT_BY_SEARCHER_METRIC", headers=user).json()["checkpoints"]
    assert [c["uuid"] for c in best] == [uid("ck-20"), uid("ck-30")]
    for c in best:
        assert c["training"]["experimentConfig"]["searcher"]["metric"] == "loss"


def test_unknown_checkpoint_is_404(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/checkpoints/does-not-exist", headers=user).status_code == 404


# -- who may register a checkpoint, and what it may say -----------------------------------


def test_a_user_token_cannot_register_a_checkpoint(
    client: TestClient, user: dict, admin: dict, task: StartedTask
) -> None:
    """Only a task registers checkpoints: a user's token, even an admin's, cannot (nor name a storage)."""
    for headers in (user, admin):
        r = post(client, "/api/v1/checkpoints", det_checkpoint(task, 1), headers)
        assert r.status_code == 403, r.text
        assert "task token" in r.json()["message"]
    assert client.get("/api/v1/checkpoints", headers=user).json()["checkpoints"] == []


def test_a_storage_in_the_body_is_refused(client: TestClient, user: dict, task: StartedTask, tmp_path: Path) -> None:
    """A storage in the body naming a directory of the master's host is refused, so no download can
    stream that directory."""
    victim = tmp_path / "some" / "dir"
    (victim / "important").mkdir(parents=True)
    (victim / "important" / "passwords.txt").write_text("hunter2")
    storage = {"type": "shared_fs", "host_path": str(victim)}
    probe = {"checkpoint": {"uuid": "important", "metadata": {"steps_completed": 0}, "storage": storage}}
    assert post(client, "/api/v1/checkpoints", probe, user).status_code in (400, 403)
    body = det_checkpoint(task, 0)
    body["storage"] = storage
    r = post(client, "/api/v1/checkpoints", {"checkpoint": body}, bearer(task.token))
    assert r.status_code == 400
    assert "checkpoint.storage" in r.json()["message"]
    assert client.get(f"/api/v1/checkpoints/{body['uuid']}", headers=user).status_code == 404
    r = client.get("/api/v1/checkpoints/important/download", headers=user)
    assert r.status_code == 404 and b"hunter2" not in r.content


def test_the_storage_recorded_is_the_experiments(client: TestClient, user: dict, task: StartedTask) -> None:
    body = det_checkpoint(task, 2)
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    c = describe(client, user, body["uuid"])
    assert c["storage"] == c["training"]["experimentConfig"]["checkpoint_storage"]
    assert c["storage"]["host_path"] == str(ctx_of(client.app).config.data_dir / "checkpoints")
    # Determined's storageId: one number per distinct storage config, the same on every read
    assert isinstance(c["storageId"], int) and 0 < c["storageId"] < 2**31
    assert c["storageId"] == describe(client, user, body["uuid"])["storageId"] == storage_id(c["storage"])
    assert storage_id({**c["storage"], "storage_path": "elsewhere"}) != c["storageId"]


def test_a_task_token_of_another_trial_cannot_register(
    client: TestClient, task: StartedTask, other: StartedTask
) -> None:
    for field, value in (
        ("training", {"trialId": task.trial_id}),
        ("allocationId", task.allocation_id),
        ("taskId", task.task_id),
    ):
        body = det_checkpoint(other, 1)
        body[field] = value
        r = post(client, "/api/v1/checkpoints", body, bearer(other.token))
        assert r.status_code == 403, (field, r.text)
    # naming nothing, a checkpoint belongs to the caller's own trial
    body = det_checkpoint(other, 1)
    del body["allocationId"], body["taskId"]
    r = post(client, "/api/v1/checkpoints", body, bearer(other.token))
    assert r.status_code == 200, r.text
    assert r.json()["checkpoint"]["training"]["trialId"] == other.trial_id


def test_the_token_of_an_ended_task_cannot_register(client: TestClient, task: StartedTask, agent: FakeAgent) -> None:
    agent.exit(task.allocation_id, 0)
    assert post(client, "/api/v1/checkpoints", det_checkpoint(task, 1), bearer(task.token)).status_code == 401


@pytest.mark.parametrize("bad", ["..", ".", "a\\b", "important", "", "../" + uid("x"), 5, None])
def test_the_uuid_must_be_a_uuid(client: TestClient, user: dict, task: StartedTask, bad: object) -> None:
    """`..`, `.`, `a\\b` and other non-UUIDs are refused (a download of them would leave the checkpoint)."""
    body = det_checkpoint(task, 1)
    body["uuid"] = bad
    r = post(client, "/api/v1/checkpoints", body, bearer(task.token))
    assert r.status_code == 400, r.text
    assert "checkpoint.uuid" in r.json()["message"]
    assert client.get("/api/v1/checkpoints", headers=user).json()["checkpoints"] == []


def test_a_uuid_is_stored_in_its_canonical_form(client: TestClient, user: dict, task: StartedTask) -> None:
    canonical = str(uuid.uuid4())
    body = det_checkpoint(task, 1)
    body["uuid"] = "{" + canonical.upper() + "}"
    r = post(client, "/api/v1/checkpoints", body, bearer(task.token))
    assert r.status_code == 200, r.text
    assert r.json()["checkpoint"]["uuid"] == canonical
    assert describe(client, user, canonical)["uuid"] == canonical


@pytest.mark.parametrize(
    "resources",
    [
        {"../x": "1"},
        {"/etc/passwd": "1"},
        {"a/../../b": "1"},
        {"./a": "1"},
        {"a//b": "1"},
        {"": "1"},
        {"a\x00b": "1"},
        {"a": "-1"},
        {"a": -1},
        {"a": "lots"},
        {"a": True},
        {"a": 1.5},
        {"a": 2**70},
        {"a": None},
    ],
)
def test_resources_are_relative_paths_and_sizes(client: TestClient, task: StartedTask, resources: dict) -> None:
    body = det_checkpoint(task, 1)
    body["resources"] = resources
    r = post(client, "/api/v1/checkpoints", body, bearer(task.token))
    assert r.status_code == 400, r.text
    assert "resources" in r.json()["message"]  # the body's own shape: checkpoint.resources, or resources.<path>


def test_resources_take_directories_and_int_sizes(client: TestClient, user: dict, task: StartedTask) -> None:
    body = det_checkpoint(task, 1)
    body["resources"] = {"d/": "0", "d/model.pt": 12, "metadata.json": "27"}
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    assert describe(client, user, body["uuid"])["resources"] == {"d/": "0", "d/model.pt": "12", "metadata.json": "27"}


# -- GET /api/v1/checkpoints and /api/v1/checkpoints/{uuid}/download --------------------------------


def _master_storage(client: TestClient):
    from pedl.common.checkpoint_storage import storage_from_config

    return storage_from_config(client.app.state.ctx.config.effective_checkpoint_storage().model_dump())


def test_list_filters_by_experiment_trial_and_state(
    client: TestClient, user: dict, task: StartedTask, clock: ManualClock
) -> None:
    for steps in (1, 2, 3):
        post(client, "/api/v1/checkpoints", det_checkpoint(task, steps, f"ck-{steps}"), bearer(task.token))
        clock.advance(1)  # listed in report order
    validate(client, task, 2, 0.5)
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]
    body = client.get(f"/api/v1/checkpoints?experimentId={exp_id}", headers=user).json()
    assert [c["uuid"] for c in body["checkpoints"]] == [uid("ck-1"), uid("ck-2"), uid("ck-3")]
    assert body["pagination"]["total"] == 3
    [two] = [c for c in body["checkpoints"] if c["uuid"] == uid("ck-2")]
    assert two["training"]["validationMetrics"]["avgMetrics"] == {"loss": 0.5}
    assert two["training"]["trialId"] == task.trial_id
    assert client.get(f"/api/v1/checkpoints?trialId={task.trial_id}&limit=2&offset=2", headers=user).json()[
        "checkpoints"
    ][0]["uuid"] == uid("ck-3")
    newest = client.get("/api/v1/checkpoints?orderBy=ORDER_BY_DESC&limit=1", headers=user).json()
    assert newest["checkpoints"][0]["uuid"] == uid("ck-3") and newest["pagination"]["endIndex"] == 1
    assert client.get(f"/api/v1/checkpoints?experimentId={exp_id + 1}", headers=user).json()["checkpoints"] == []
    assert client.get("/api/v1/checkpoints?states=STATE_DELETED", headers=user).json()["checkpoints"] == []
    r = client.get("/api/v1/checkpoints?states=GONE", headers=user)
    assert r.status_code == 400 and "states" in r.json()["message"]


def test_download_streams_a_tar_of_the_files(client: TestClient, user: dict, task: StartedTask) -> None:
    storage = _master_storage(client)
    name = uid("dl-1")
    with storage.store_path(name) as path:
        (path / "weights.bin").write_bytes(bytes(range(256)) * 40)
        (path / "nested" / "deeper").mkdir(parents=True)
        (path / "nested" / "state.json").write_text('{"step": 3}')
    body = det_checkpoint(task, 3, "dl-1")
    body["resources"] = {k: str(v) for k, v in storage.resources(name).items()}
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get(f"/api/v1/checkpoints/{name}/download", headers=user)
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
    r = client.get(f"/api/v1/checkpoints/{uid('no-files')}/download", headers=user)
    assert r.status_code == 404 and "has no files" in r.json()["message"]
    body = det_checkpoint(task, 2, "gone")
    body["state"] = "STATE_DELETED"
    post(client, "/api/v1/checkpoints", body, bearer(task.token))
    r = client.get(f"/api/v1/checkpoints/{uid('gone')}/download", headers=user)
    assert r.status_code == 404 and "STATE_DELETED" in r.json()["message"]
    assert client.get(f"/api/v1/checkpoints/{uid('gone')}/download").status_code == 401


def test_download_never_follows_a_symlink_out_of_the_checkpoint(
    client: TestClient, user: dict, task: StartedTask, tmp_path: Path
) -> None:
    """Neither a link to a secret is streamed nor a dangling link fails the download: links are left out
    of the tar, whatever they point at."""
    secret = tmp_path / "secret.txt"
    secret.write_text("TOP-SECRET-BYTES")
    (tmp_path / "secret-dir").mkdir()
    (tmp_path / "secret-dir" / "key").write_text("TOP-SECRET-BYTES")
    storage = _master_storage(client)
    name = uid("links")
    with storage.store_path(name) as path:
        (path / "model.pt").write_bytes(b"m" * 100)
        (path / "link").symlink_to(secret)
        (path / "dir-link").symlink_to(tmp_path / "secret-dir", target_is_directory=True)
        (path / "dangling").symlink_to(tmp_path / "nowhere")
        (path / "inner").symlink_to("model.pt")
        os.mkfifo(path / "fifo")  # opening it would block the download forever
    body = det_checkpoint(task, 3, "links")
    body["resources"] = {"model.pt": "100", "link": "16"}  # what the trial claims does not matter
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    r = client.get(f"/api/v1/checkpoints/{name}/download", headers=user)
    assert r.status_code == 200, r.text
    assert b"TOP-SECRET" not in r.content
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        assert [m.name for m in tar.getmembers()] == ["model.pt"]
        assert tar.extractfile("model.pt").read() == b"m" * 100


def test_a_checkpoint_directory_that_is_a_symlink_is_not_served(
    client: TestClient, user: dict, task: StartedTask, tmp_path: Path
) -> None:
    (tmp_path / "secret-dir").mkdir()
    (tmp_path / "secret-dir" / "key").write_text("TOP-SECRET-BYTES")
    storage = _master_storage(client)
    storage.base_path.mkdir(parents=True, exist_ok=True)
    (storage.base_path / uid("dir-link")).symlink_to(tmp_path / "secret-dir", target_is_directory=True)
    r = post(client, "/api/v1/checkpoints", det_checkpoint(task, 1, "dir-link"), bearer(task.token))
    assert r.status_code == 200
    r = client.get(f"/api/v1/checkpoints/{uid('dir-link')}/download", headers=user)
    assert r.status_code == 403, r.text
    assert "symbolic link" in r.json()["message"] and b"TOP-SECRET" not in r.content


def test_download_reads_s3_checkpoints_from_the_bucket(
    client: TestClient, user: dict, agent: FakeAgent, moto_endpoint: str
) -> None:
    import boto3

    from pedl.common.checkpoint_storage import S3Storage

    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket="dl-bucket")

    def s3_task(bucket: str) -> StartedTask:
        storage = f"checkpoint_storage: {{type: s3, bucket: {bucket}, prefix: p, endpoint_url: '{moto_endpoint}'}}\n"
        create_experiment(client, user, SINGLE_CONFIG + storage)
        [started] = agent.start_all()
        return started

    task = s3_task("dl-bucket")
    storage = S3Storage("dl-bucket", prefix="p", endpoint_url=moto_endpoint)
    with storage.store_path(uid("s3-ck")) as path:
        (path / "model.pt").write_bytes(b"m" * 1000)
    post(client, "/api/v1/checkpoints", det_checkpoint(task, 5, "s3-ck"), bearer(task.token))
    r = client.get(f"/api/v1/checkpoints/{uid('s3-ck')}/download", headers=user)
    assert r.status_code == 200, r.text
    with tarfile.open(fileobj=io.BytesIO(r.content)) as tar:
        assert tar.extractfile("model.pt").read() == b"m" * 1000
    # a bucket that does not exist is a 404 naming it, before any byte of tar
    agent.exit(task.allocation_id, 0)
    task = s3_task("not-there")
    post(client, "/api/v1/checkpoints", det_checkpoint(task, 6, "s3-nobucket"), bearer(task.token))
    r = client.get(f"/api/v1/checkpoints/{uid('s3-nobucket')}/download", headers=user)
    assert r.status_code == 404 and "'not-there' does not exist" in r.json()["message"]


# -- checkpoints stored before storage roots were checked ------------------------------------------------------------


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A directory of the master's host outside every storage root, holding `important/`."""
    victim = tmp_path / "some" / "dir"
    (victim / "important").mkdir(parents=True)
    (victim / "important" / "passwords.txt").write_text("hunter2")
    return victim


def test_legacy_checkpoints_outside_the_roots_are_not_served(
    client: TestClient, app: FastAPI, user: dict, task: StartedTask, victim: Path
) -> None:
    legacy_checkpoint(app, task, "important", {"type": "shared_fs", "host_path": str(victim)})
    r = client.get("/api/v1/checkpoints/important/download", headers=user)
    assert r.status_code == 403, r.text
    assert "outside" in r.json()["message"] and "storage root" in r.json()["message"]
    assert b"hunter2" not in r.content


def test_an_experiment_stored_outside_the_roots_is_not_served(
    client: TestClient, app: FastAPI, user: dict, task: StartedTask, victim: Path
) -> None:
    with ctx_of(app).db.session() as s:  # an experiment created before the roots were checked
        exp = s.get(models.Experiment, s.get(models.Trial, task.trial_id).experiment_id)
        exp.config = {**exp.config, "checkpoint_storage": {"type": "shared_fs", "host_path": str(victim)}}
    legacy_checkpoint(app, task, "important", {})
    r = client.get("/api/v1/checkpoints/important/download", headers=user)
    assert r.status_code == 403, r.text
    assert "checkpoint_storage.host_path" in r.json()["message"] and b"hunter2" not in r.content


@pytest.mark.parametrize("legacy_uuid", ["%2E%2E", "%2E", "a%5Cb"])
def test_legacy_uuids_that_are_not_a_path_component_are_403_not_500(
    client: TestClient, app: FastAPI, user: dict, task: StartedTask, legacy_uuid: str
) -> None:
    from urllib.parse import unquote

    legacy_checkpoint(app, task, unquote(legacy_uuid), {})
    r = client.get(f"/api/v1/checkpoints/{legacy_uuid}/download", headers=user)
    assert r.status_code == 403, r.text
    assert "uuid" in r.json()["message"]


def test_legacy_checkpoints_outside_the_roots_are_reported_at_start(
    client: TestClient,
    app: FastAPI,
    task: StartedTask,
    victim: Path,
    master_config: MasterConfig,
    clock: ManualClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    legacy_checkpoint(app, task, "important", {"type": "shared_fs", "host_path": str(victim)})
    legacy_checkpoint(app, task, "a\\b", {})
    legacy_checkpoint(app, task, uid("fine"), {})
    with caplog.at_level(logging.WARNING), TestClient(create_app(master_config, clock=clock)):
        pass
    warned = [r.getMessage() for r in caplog.records if "storage root" in r.getMessage()]
    assert any("important" in line and str(victim) in line for line in warned), warned
    assert any("'a\\\\b'" in line for line in warned), warned
    assert not any(uid("fine") in line for line in warned)
    with ctx_of(app).db.session() as s:  # reported, never touched
        assert (
            s.scalar(select(models.Checkpoint.state).where(models.Checkpoint.uuid == "important")) == "STATE_COMPLETED"
        )


def test_experiment_trials_carry_their_checkpoint_counts(app: FastAPI, client: TestClient, user: dict) -> None:
    """GET /experiments/{id}/trials counts each trial's checkpoints in one grouped query per page, and
    a new checkpoint changes the ETag the page polls with."""
    from sqlalchemy import event

    fake = FakeAgent(app, "agent-2x", slots=2)
    try:
        exp = create_experiment(client, user)  # grid: two trials
        first, second = sorted(fake.start_all(), key=lambda t: t.trial_id)
        for task, steps in ((first, 1), (first, 2), (second, 1)):
            assert (
                post(client, "/api/v1/checkpoints", det_checkpoint(task, steps), bearer(task.token)).status_code == 200
            )
        url = f"/api/v1/experiments/{exp['id']}/trials"
        statements: list[str] = []
        db = ctx_of(app).db
        engines = {id(e): e for e in (db.engine, db.read_engine)}.values()  # one engine on PostgreSQL

        def seen(_conn, _cursor, statement: str, *_args) -> None:
            statements.append(statement)

        for engine in engines:
            event.listen(engine, "before_cursor_execute", seen)
        try:
            r = client.get(url, headers=user)
        finally:
            for engine in engines:
                event.remove(engine, "before_cursor_execute", seen)
        assert r.status_code == 200, r.text
        assert {t["id"]: t["checkpointCount"] for t in r.json()["trials"]} == {first.trial_id: 2, second.trial_id: 1}
        assert len([q for q in statements if "FROM checkpoints" in q]) == 1
        page = client.get(url, params={"offset": 1, "limit": 1}, headers=user).json()["trials"]
        assert [(t["id"], t["checkpointCount"]) for t in page] == [(second.trial_id, 1)]

        etag = r.headers["ETag"]
        assert client.get(url, headers={**user, "If-None-Match": etag}).status_code == 304
        post(client, "/api/v1/checkpoints", det_checkpoint(second, 3), bearer(second.token))
        again = client.get(url, headers={**user, "If-None-Match": etag})
        assert again.status_code == 200
        assert {t["id"]: t["checkpointCount"] for t in again.json()["trials"]} == {
            first.trial_id: 2,
            second.trial_id: 2,
        }
        with db.session() as s:  # garbage collection deleted one: it no longer counts
            s.scalars(
                select(models.Checkpoint).where(
                    models.Checkpoint.trial_id == first.trial_id, models.Checkpoint.steps_completed == 1
                )
            ).one().state = CheckpointState.DELETED
        counted = client.get(url, headers=user).json()["trials"]
        assert {t["id"]: t["checkpointCount"] for t in counted} == {first.trial_id: 1, second.trial_id: 2}
    finally:
        fake.close()


def test_listed_experiments_carry_their_checkpoint_totals_in_one_query(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    """GET /experiments: each experiment's checkpointCount and checkpointSize (int64 as a string:
    the bytes of its checkpoints not DELETED), in one grouped query for the page whatever its size."""
    from sqlalchemy import event

    fake = FakeAgent(app, "agent-2x", slots=2)
    try:
        ids = [create_experiment(client, user, SINGLE_CONFIG)["id"] for _ in range(3)]
        tasks = {t.trial_id: t for t in fake.start_all()}
        first, second = (tasks[t] for t in sorted(tasks))
        for task, steps in ((first, 1), (first, 2), (second, 1)):
            assert (
                post(client, "/api/v1/checkpoints", det_checkpoint(task, steps), bearer(task.token)).status_code == 200
            )
        with ctx_of(app).db.session() as s:  # garbage collection deleted one: it no longer counts
            s.scalars(
                select(models.Checkpoint).where(models.Checkpoint.trial_id == second.trial_id)
            ).one().state = CheckpointState.DELETED
        statements: list[str] = []
        db = ctx_of(app).db
        engines = {id(e): e for e in (db.engine, db.read_engine)}.values()

        def seen(_conn, _cursor, statement: str, *_args) -> None:
            statements.append(statement)

        for engine in engines:
            event.listen(engine, "before_cursor_execute", seen)
        try:
            r = client.get("/api/v1/experiments", headers=user)
        finally:
            for engine in engines:
                event.remove(engine, "before_cursor_execute", seen)
        assert r.status_code == 200, r.text
        assert {e["id"]: (e["checkpointCount"], e["checkpointSize"]) for e in r.json()["experiments"]} == {
            ids[0]: (2, str(2 * 1051)),
            ids[1]: (0, "0"),
            ids[2]: (0, "0"),
        }
        assert len([q for q in statements if "FROM checkpoints" in q]) == 1
        shown = client.get(f"/api/v1/experiments/{ids[0]}", headers=user).json()["experiment"]
        assert (shown["checkpointCount"], shown["checkpointSize"]) == (2, "2102")
    finally:
        fake.close()


def test_a_trials_checkpoints_sort_filter_and_page_as_det_asks(app: FastAPI, client: TestClient, user: dict) -> None:
    """GET /trials/{id}/checkpoints: `det trial download --best` (searcher metric, best first) and
    `--latest` (batch number, descending), the SDK's states filter, sortByMetric, and pages."""
    fake = FakeAgent(app, "agent-ckpt-sort", slots=1)
    try:
        create_experiment(client, user, SINGLE_CONFIG)  # searcher metric: loss, smaller is better
        [task] = fake.start_all()
        uuids = {}
        for steps, loss in ((1, 0.5), (2, 0.2), (3, 0.9)):
            body = det_checkpoint(task, steps)
            uuids[steps] = body["uuid"]
            assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
            validate(client, task, steps, loss)
        url = f"/api/v1/trials/{task.trial_id}/checkpoints"

        def listed(**params) -> list[int]:
            r = client.get(url, params=params, headers=user)
            assert r.status_code == 200, r.text
            return [c["metadata"]["steps_completed"] for c in r.json()["checkpoints"]]

        assert listed(sortByAttr="SORT_BY_SEARCHER_METRIC") == [2, 1, 3]  # best first
        assert listed(sortByAttr="SORT_BY_SEARCHER_METRIC", orderBy="ORDER_BY_DESC") == [3, 1, 2]  # values down
        assert listed(sortByAttr="SORT_BY_BATCH_NUMBER", orderBy="ORDER_BY_DESC", limit=1) == [3]
        assert listed(sortByMetric="loss", orderBy="ORDER_BY_ASC") == [2, 1, 3]
        assert listed(offset=1, limit=1) == [2]
        page = client.get(url, params={"offset": 1, "limit": 1}, headers=user).json()["pagination"]
        assert page["total"] == 3 and page["offset"] == 1
        with ctx_of(app).db.session() as s:
            s.get(models.Checkpoint, uuids[1]).state = CheckpointState.DELETED
        assert listed(states="STATE_COMPLETED") == [2, 3]
        assert listed(states=["STATE_COMPLETED", "STATE_DELETED"]) == [1, 2, 3]
        for params, field in (
            ({"sortByAttr": "SORT_BY_COLOR"}, "sortByAttr"),
            ({"orderBy": "UP"}, "orderBy"),
            ({"states": "STATE_GONE"}, "states"),
        ):
            r = client.get(url, params=params, headers=user)
            assert r.status_code == 400 and field in r.json()["message"], r.text
        assert client.get("/api/v1/trials/999/checkpoints", headers=user).status_code == 404
    finally:
        fake.close()
