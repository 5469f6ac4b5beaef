"""What users change of checkpoints over the API, as Determined's SDK and det send it: metadata (POST
/checkpoints/{uuid}/metadata), delete (DELETE /checkpoints) and file removal (POST /checkpoints/rm), on
shared_fs and S3 (moto); and the metric reports behind a checkpoint (GET /checkpoints/{uuid}/metrics).
Each effect is checked through the API and on disk or in the bucket."""

from __future__ import annotations

import json
import uuid as uuid_lib
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pedl.common.checkpoint_files import list_directory
from pedl.common.checkpoint_storage import S3Storage, SharedFSStorage
from pedl.config.master_config import MasterConfig
from pedl.errors import Unavailable
from pedl.master.checkpoints import edits as checkpoint_edits
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, ctx_of, login, post
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401

BUCKET = "edits-bucket"
FILES = {"model.pt": b"m" * 100, "optimizer.pt": b"o" * 50, "logs/events.txt": b"e" * 10, "metadata.json": b"{}"}


@pytest.fixture
def master_config(master_config: MasterConfig, moto_server: str) -> MasterConfig:
    security = master_config.security.model_copy(
        update={"checkpoint_storage_roots": [f"s3://{BUCKET}"], "s3_endpoint_urls": [moto_server]}
    )
    # the fake agent runs no checkpoint GC task: these tests drive the master-side path
    return master_config.model_copy(update={"security": security, "checkpoint_gc_tasks": False})


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def storage_of(client: TestClient) -> SharedFSStorage:
    return SharedFSStorage(ctx_of(client.app).config.effective_checkpoint_storage().host_path)


def stored(client: TestClient, task: StartedTask, steps: int, files: dict[str, bytes] = FILES, storage=None) -> str:
    """Write a checkpoint's files where its experiment keeps them and report it with their listing."""
    name = str(uuid_lib.uuid4())
    storage = storage or storage_of(client)
    with storage.store_path(name) as path:
        for rel, data in files.items():
            (path / rel).parent.mkdir(parents=True, exist_ok=True)
            (path / rel).write_bytes(data)
        listing = list_directory(path)
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "training": {},
        "metadata": {"steps_completed": steps, "framework": "torch"},
        "state": "STATE_COMPLETED",
        "resources": {k: str(v) for k, v in listing.items()},
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def shown(client: TestClient, headers: dict, name: str) -> dict:
    r = client.get(f"/api/v1/checkpoints/{name}", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["checkpoint"]


def metadata_body(name: str, metadata: dict) -> dict:
    """What the SDK's add_metadata/remove_metadata send."""
    return {
        "checkpoint": {
            "uuid": name,
            "metadata": metadata,
            "resources": {},
            "training": {},
            "state": "STATE_UNSPECIFIED",
        }
    }


def delete(client: TestClient, headers: dict, *names: str):
    return client.request(
        "DELETE", "/api/v1/checkpoints", content=json.dumps({"checkpointUuids": list(names)}), headers=headers
    )


def rm(client: TestClient, headers: dict, names: list[str], globs: list[str]):
    return post(client, "/api/v1/checkpoints/rm", {"checkpointUuids": names, "checkpointGlobs": globs}, headers)


@pytest.fixture
def bob(client: TestClient, admin: dict) -> dict:
    body = {
        "user": {"username": "bob", "admin": False, "active": True},
        "password": client_hash("pw-bob"),
        "isHashed": True,
    }
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    return bearer(login(client, "bob", "pw-bob"))


# -- metadata -------------------------------------------------------------------------------------


def test_metadata_is_replaced_whole_and_answered(client: TestClient, user: dict, task: StartedTask) -> None:
    name = stored(client, task, 4)
    r = post(
        client,
        f"/api/v1/checkpoints/{name}/metadata",
        metadata_body(name, {"steps_completed": 4, "framework": "torch", "note": "best", "n": [1, 2.5]}),
        user,
    )
    assert r.status_code == 200, r.text
    assert r.json()["checkpoint"]["metadata"] == {
        "steps_completed": 4,
        "framework": "torch",
        "note": "best",
        "n": [1, 2.5],
    }
    assert shown(client, user, name)["metadata"]["note"] == "best"
    # remove_metadata sends what is left; steps_completed may go, and is shown anyway
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(name, {"framework": "torch"}), user)
    assert r.status_code == 200, r.text
    assert shown(client, user, name)["metadata"] == {"framework": "torch", "steps_completed": 4}


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"steps_completed": 9}, "checkpoint.metadata.steps_completed"),
        ({f"k{i}": "x" * 1000 for i in range(70)}, "checkpoint.metadata"),
        ({"bad": "nul\x00"}, "checkpoint.metadata.bad"),
    ],
)
def test_metadata_that_cannot_be_stored_is_refused_naming_the_field(
    client: TestClient, user: dict, task: StartedTask, metadata: dict, field: str
) -> None:
    name = stored(client, task, 4)
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(name, metadata), user)
    assert r.status_code == 400, r.text
    assert [f["field"] for f in r.json()["fields"]] == [field]
    assert shown(client, user, name)["metadata"] == {"steps_completed": 4, "framework": "torch"}


def test_metadata_refusals(client: TestClient, user: dict, admin: dict, bob: dict, task: StartedTask) -> None:
    name = stored(client, task, 4)
    other = str(uuid_lib.uuid4())
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(other, {"a": 1}), user)
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "checkpoint.uuid"
    r = post(client, f"/api/v1/checkpoints/{other}/metadata", metadata_body(other, {"a": 1}), user)
    assert r.status_code == 404 and other in r.json()["message"]
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", {"checkpoint": {"uuid": name}}, user)
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "checkpoint.metadata"
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(name, {"a": 1}), bob)
    assert r.status_code == 403 and "owner" in r.json()["message"]
    r = post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(name, {"a": 1}), bearer(task.token))
    assert r.status_code == 403
    assert "a" not in shown(client, user, name)["metadata"]
    assert post(client, f"/api/v1/checkpoints/{name}/metadata", metadata_body(name, {"a": 1}), admin).status_code == 200
    assert shown(client, bob, name)["metadata"]["a"] == 1  # any user reads


# -- delete -------------------------------------------------------------------------------------


def test_delete_removes_the_files_and_marks_the_checkpoints_deleted(
    client: TestClient, user: dict, task: StartedTask
) -> None:
    storage = storage_of(client)
    first, second, kept = stored(client, task, 2), stored(client, task, 4), stored(client, task, 6)
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["latestCheckpointUuid"] == kept
    listed = {name: shown(client, user, name)["resources"] for name in (first, kept)}
    r = delete(client, user, first, kept)
    assert r.status_code == 200 and r.json() == {}, r.text
    for name in (first, kept):
        assert not storage.path_of(name).exists()
        c = shown(client, user, name)  # as Determined's, it keeps listing the files it had
        assert c["state"] == "STATE_DELETED" and c["resources"] == listed[name] != {}
    assert storage.path_of(second).is_dir() and shown(client, user, second)["state"] == "STATE_COMPLETED"
    # the trial would resume from its newest checkpoint that still has its files
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["latestCheckpointUuid"] == second
    assert delete(client, user, first).status_code == 200  # deleting again: nothing to do


def test_delete_refusals_change_nothing(
    client: TestClient, user: dict, admin: dict, bob: dict, task: StartedTask
) -> None:
    storage = storage_of(client)
    name, registered = stored(client, task, 2), stored(client, task, 4)
    unknown = str(uuid_lib.uuid4())
    r = delete(client, user, name, unknown)
    assert r.status_code == 404 and unknown in r.json()["message"], r.text
    r = delete(client, bob, name)
    assert r.status_code == 403 and "owner" in r.json()["message"]
    assert delete(client, bearer(task.token), name).status_code == 403
    assert post(client, "/api/v1/models", {"name": "kept-model"}, user).status_code == 200
    assert post(client, "/api/v1/models/kept-model/versions", {"checkpointUuid": registered}, user).status_code == 200
    r = delete(client, admin, name, registered)
    assert r.status_code == 400, r.text
    assert registered in r.json()["message"] and "'kept-model' version 1" in r.json()["message"]
    r = delete(client, user, "not-a-uuid")
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "checkpointUuids[0]"
    r = delete(client, user)
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "checkpointUuids"
    many = [str(uuid_lib.uuid4()) for _ in range(checkpoint_edits.MAX_UUIDS + 1)]
    r = delete(client, user, *many)
    assert r.status_code == 400 and "limit" in r.json()["message"]
    for n in (name, registered):
        assert storage.path_of(n).is_dir() and shown(client, user, n)["state"] == "STATE_COMPLETED"
    assert delete(client, admin, name).status_code == 200  # an admin may
    assert shown(client, user, name)["state"] == "STATE_DELETED"


def test_a_checkpoint_outside_the_storage_roots_is_left_alone(
    client: TestClient, user: dict, task: StartedTask, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "keep").write_text("x")
    storage = storage_of(client)
    storage.base_path.mkdir(parents=True, exist_ok=True)
    name = str(uuid_lib.uuid4())
    (storage.base_path / name).symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "metadata": {"steps_completed": 1},
        "resources": {"keep": "1"},
        "state": "STATE_COMPLETED",
        "training": {},
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    for r in (delete(client, user, name), rm(client, user, [name], ["keep"])):
        assert r.status_code == 403 and "symbolic link" in r.json()["message"], r.text
    assert (tmp_path / "elsewhere" / "keep").exists() and shown(client, user, name)["state"] == "STATE_COMPLETED"


# -- remove files ----------------------------------------------------------------------------------


def test_remove_files_by_glob_then_everything(client: TestClient, user: dict, task: StartedTask) -> None:
    storage = storage_of(client)
    name = stored(client, task, 3)
    r = rm(client, user, [name], ["*.pt"])
    assert r.status_code == 200 and r.json() == {}, r.text
    assert sorted(list_directory(storage.path_of(name))) == ["logs/", "logs/events.txt", "metadata.json"]
    c = shown(client, user, name)
    assert c["state"] == "STATE_PARTIALLY_DELETED"
    assert c["resources"] == {"logs/": "0", "logs/events.txt": "10", "metadata.json": "2"}
    # det trial describe asserts on PARTIALLY_DELETED workloads: they show the files left as COMPLETED
    work = client.get(f"/api/v1/trials/{task.trial_id}/workloads", headers=user).json()["workloads"]
    [ck] = [w["checkpoint"] for w in work if "checkpoint" in w]
    assert ck["state"] == "STATE_COMPLETED" and ck["resources"] == c["resources"]
    # a directory takes what is under it; the latest checkpoint with files is none now
    assert rm(client, user, [name], ["logs"]).status_code == 200
    assert shown(client, user, name)["resources"] == {"metadata.json": "2"}
    assert rm(client, user, [name], ["**/*"]).status_code == 200
    assert not storage.path_of(name).exists()
    assert shown(client, user, name)["state"] == "STATE_DELETED"
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert trial["latestCheckpointUuid"] == ""


def test_remove_files_without_globs_reads_storage_again(client: TestClient, user: dict, task: StartedTask) -> None:
    storage = storage_of(client)
    name = stored(client, task, 3)
    assert rm(client, user, [name], []).status_code == 200  # nothing changed: nothing changes
    assert shown(client, user, name)["state"] == "STATE_COMPLETED"
    (storage.path_of(name) / "optimizer.pt").unlink()  # gone behind the master's back
    assert rm(client, user, [name], []).status_code == 200
    c = shown(client, user, name)
    assert c["state"] == "STATE_PARTIALLY_DELETED" and "optimizer.pt" not in c["resources"]
    assert c["resources"]["model.pt"] == "100"


def test_checkpoint_sizes_count_the_files_left(client: TestClient, user: dict, task: StartedTask) -> None:
    """A trial's checkpointCount and totalCheckpointSize and its experiment's checkpointCount and
    checkpointSize (described and listed) count each checkpoint's files left and nothing of a DELETED
    one, as Determined's (det's e2e test_checkpoint_partial_delete); a conditional GET sees the change."""
    a, b = stored(client, task, 2), stored(client, task, 4)
    full = sum(int(v) for v in shown(client, user, a)["resources"].values())
    exp_id = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]["experimentId"]

    def totals() -> set[tuple[int, str]]:
        trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
        [in_page] = client.get(f"/api/v1/experiments/{exp_id}/trials", headers=user).json()["trials"]
        exp = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
        [listed] = client.get("/api/v1/experiments", headers=user).json()["experiments"]
        return {
            (trial["checkpointCount"], trial["totalCheckpointSize"]),
            (in_page["checkpointCount"], in_page["totalCheckpointSize"]),
            (exp["checkpointCount"], exp["checkpointSize"]),
            (listed["checkpointCount"], listed["checkpointSize"]),
        }

    assert totals() == {(2, str(2 * full))}
    etag = client.get(f"/api/v1/experiments/{exp_id}", headers=user).headers["ETag"]
    assert rm(client, user, [a], ["*.pt"]).status_code == 200  # 150 bytes of model.pt and optimizer.pt go
    r = client.get(f"/api/v1/experiments/{exp_id}", headers={**user, "If-None-Match": etag})
    assert r.status_code == 200 and r.json()["experiment"]["checkpointSize"] == str(2 * full - 150)
    (storage_of(client).path_of(b) / "metadata.json").unlink()  # 2 bytes gone behind the master's back
    assert rm(client, user, [b], []).status_code == 200
    assert totals() == {(2, str(2 * full - 152))}
    assert delete(client, user, a).status_code == 200
    assert totals() == {(1, str(full - 2))}
    assert shown(client, user, a)["resources"] == {"logs/": "0", "logs/events.txt": "10", "metadata.json": "2"}


@pytest.mark.parametrize(
    ("globs", "field", "words"),
    [
        (["../other/*"], "checkpointGlobs[0]", "'..'"),
        (["*.pt", "/etc/passwd"], "checkpointGlobs[1]", "absolute"),
        ([""], "checkpointGlobs[0]", "empty"),
        (["./"], "checkpointGlobs[0]", "checkpoint itself"),
    ],
)
def test_globs_that_leave_the_checkpoint_are_refused(
    client: TestClient, user: dict, task: StartedTask, globs: list[str], field: str, words: str
) -> None:
    storage = storage_of(client)
    name = stored(client, task, 3)
    r = rm(client, user, [name], globs)
    assert r.status_code == 400, r.text
    assert r.json()["fields"][0]["field"] == field and words in r.json()["message"]
    assert sorted(list_directory(storage.path_of(name))) == sorted(
        ["logs/", "logs/events.txt", "metadata.json", "model.pt", "optimizer.pt"]
    )
    assert shown(client, user, name)["state"] == "STATE_COMPLETED"


def test_remove_files_refusals(client: TestClient, user: dict, bob: dict, task: StartedTask) -> None:
    name = stored(client, task, 3)
    assert rm(client, bob, [name], ["*.pt"]).status_code == 403
    assert rm(client, user, [str(uuid_lib.uuid4())], ["*.pt"]).status_code == 404
    assert post(client, "/api/v1/models", {"name": "m"}, user).status_code == 200
    assert post(client, "/api/v1/models/m/versions", {"checkpointUuid": name}, user).status_code == 200
    r = rm(client, user, [name], ["*.pt"])
    assert r.status_code == 400 and "'m' version 1" in r.json()["message"]
    assert shown(client, user, name)["state"] == "STATE_COMPLETED"
    assert (storage_of(client).path_of(name) / "model.pt").exists()


def test_remove_files_and_delete_on_s3(client: TestClient, user: dict, agent: FakeAgent, moto_endpoint: str) -> None:
    import boto3

    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    config = (
        SINGLE_CONFIG + f"checkpoint_storage: {{type: s3, bucket: {BUCKET}, prefix: p, "
        f"endpoint_url: '{moto_endpoint}'}}\n"
    )
    create_experiment(client, user, config)
    [task] = agent.start_all()
    storage = S3Storage(BUCKET, prefix="p", endpoint_url=moto_endpoint)
    name, other = stored(client, task, 3, storage=storage), stored(client, task, 6, storage=storage)
    assert rm(client, user, [name], ["**/*.pt", "logs"]).status_code == 200
    assert storage.resources(name) == {"metadata.json": 2}
    c = shown(client, user, name)
    assert c["state"] == "STATE_PARTIALLY_DELETED" and c["resources"] == {"metadata.json": "2"}
    assert delete(client, user, name, other).status_code == 200
    assert storage.resources(name) == {} and storage.resources(other) == {}
    assert {shown(client, user, n)["state"] for n in (name, other)} == {"STATE_DELETED"}


def test_a_storage_failure_is_named_and_the_rest_is_marked(client: TestClient, user: dict, task: StartedTask) -> None:
    """Storage that fails one deletion: the error names that checkpoint and why; the one deleted is
    marked DELETED, the other is left PARTIALLY_DELETED (it left COMPLETED before its files were touched,
    and which are gone is unknown), no longer held, with the files it kept."""
    good, bad = stored(client, task, 2), stored(client, task, 4)

    class Failing(SharedFSStorage):
        def delete(self, uuid: str) -> None:
            if uuid == bad:
                raise OSError("disk on fire")
            super().delete(uuid)

    with pytest.raises(Unavailable) as raised:
        checkpoint_edits.delete(
            ctx_of(client.app),
            _caller(client, user),
            [good, bad],
            storage_for=lambda config: Failing(config["host_path"]),
        )
    assert bad in raised.value.message and "disk on fire" in raised.value.message
    assert f"done for checkpoint {good}" in raised.value.message
    assert shown(client, user, good)["state"] == "STATE_DELETED"
    left = shown(client, user, bad)
    assert (left["state"], left["deleting"]) == ("STATE_PARTIALLY_DELETED", False)
    assert storage_of(client).path_of(bad).is_dir()


def _caller(client: TestClient, headers: dict):
    from pedl.master.identity import users as users_service

    return users_service.resolve_caller(ctx_of(client.app), headers["Authorization"].split()[1])


# -- metrics ---------------------------------------------------------------------------------------


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


def test_metrics_are_the_reports_of_the_trials_that_reported_using_the_checkpoint(
    client: TestClient, user: dict, bob: dict, task: StartedTask
) -> None:
    """Determined's semantics: not the reports of the trial that took the checkpoint, but those of the
    trials that called report_task_using_checkpoint (tests/master/api/test_trial_source_infos.py has more)."""
    report(client, task, "training", 1, {"loss": 0.9})
    name = stored(client, task, 1)
    q = "trialSourceInfoType=TRIAL_SOURCE_INFO_TYPE_INFERENCE"
    assert client.get(f"/api/v1/checkpoints/{name}/metrics?{q}", headers=user).json() == {"metrics": []}
    other = FakeAgent(client.app, "agent-2")
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        [user_of] = other.start_all()
        report(client, user_of, "training", 2, {"loss": 0.7})
        report(client, user_of, "validation", 2, {"loss": 0.8})
        info = {
            "trialId": user_of.trial_id,
            "checkpointUuid": name,
            "trialSourceInfoType": "TRIAL_SOURCE_INFO_TYPE_INFERENCE",
        }
        assert (
            post(client, "/api/v1/trial-source-info", {"trialSourceInfo": info}, bearer(user_of.token)).status_code
            == 200
        )
    finally:
        other.close()
    r = client.get(f"/api/v1/checkpoints/{name}/metrics?metricGroup=training&{q}", headers=bob)  # any user reads
    assert r.status_code == 200, r.text
    got = r.json()["metrics"]
    assert [(m["trialId"], m["group"], m["totalBatches"], m["metrics"]) for m in got] == [
        (user_of.trial_id, "training", 2, {"avg_metrics": {"loss": 0.7}})
    ]
    assert all(m["endTime"] and m["id"] for m in got)
    # every group: training, validation, then the others; validations also under avg_metrics
    every = client.get(f"/api/v1/checkpoints/{name}/metrics?{q}", headers=user).json()["metrics"]
    assert [(m["group"], m["totalBatches"]) for m in every] == [("training", 2), ("validation", 2)]
    assert every[1]["metrics"] == {"validation_metrics": {"loss": 0.8}, "avg_metrics": {"loss": 0.8}}


def test_metrics_refusals(client: TestClient, user: dict, task: StartedTask) -> None:
    unknown = str(uuid_lib.uuid4())
    r = client.get(f"/api/v1/checkpoints/{unknown}/metrics", headers=user)
    assert r.status_code == 404 and unknown in r.json()["message"]
    name = stored(client, task, 2)
    assert client.get(f"/api/v1/checkpoints/{name}/metrics", headers=user).json() == {"metrics": []}
    r = client.get(f"/api/v1/checkpoints/{name}/metrics?trialSourceInfoType=NOPE", headers=user)
    assert r.status_code == 400 and "trialSourceInfoType" in r.text
