"""An experiment's TensorBoard files, where Determined's Core API writes them (<storage>/<cluster id>/
tensorboard/experiment/<id>/): DELETE /experiments/{id}/tensorboard-files removes that directory alone
(shared_fs and S3), for the owner or an admin; a link out of the storage is left alone; a storage
failure is Unavailable (503); and deleting the experiment deletes them too."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.common.checkpoint_storage import CheckpointStorage
from pedl.config.master_config import MasterConfig
from pedl.errors import InvalidArgument, Unavailable
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments import tensorboard_files
from pedl.master.experiments.tensorboard_files import storage_of
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401

CLUSTER = "5b0d7c1e-0000-4000-8000-000000000000"


@pytest.fixture
def master_config(master_config: MasterConfig, moto_server: str) -> MasterConfig:
    """The shared config, with the bucket of the s3 test (on moto) allowed as a storage root."""
    security = master_config.security.model_copy(
        update={"checkpoint_storage_roots": ["s3://tb-bucket"], "s3_endpoint_urls": [moto_server]}
    )
    return master_config.model_copy(update={"security": security})


# -- where the files are ------------------------------------------------------------------------


def test_the_storage_of_an_experiments_tensorboard_files() -> None:
    shared = storage_of(
        {"type": "shared_fs", "host_path": "/data", "storage_path": None, "save_trial_best": 1}, CLUSTER
    )
    assert shared == {
        "type": "shared_fs",
        "host_path": "/data",
        "save_trial_best": 1,
        "storage_path": f"{CLUSTER}/tensorboard/experiment",
    }
    assert storage_of({"host_path": "/data", "storage_path": "ckpts"}, CLUSTER)["storage_path"] == (
        f"ckpts/{CLUSTER}/tensorboard/experiment"
    )
    assert storage_of({"type": "s3", "bucket": "b", "prefix": "/team/runs/"}, CLUSTER)["prefix"] == (
        f"team/runs/{CLUSTER}/tensorboard/experiment"
    )
    assert storage_of({"type": "s3", "bucket": "b"}, CLUSTER)["prefix"] == f"{CLUSTER}/tensorboard/experiment"
    with pytest.raises(InvalidArgument):
        storage_of({"host_path": "/data"}, "../elsewhere")


# -- deleting them ------------------------------------------------------------------------------


def tb_dir(app: FastAPI, exp_id: int) -> Path:
    """Where a Determined trial of the experiment writes its event files on this master's shared_fs."""
    ctx = ctx_of(app)
    root = Path(ctx.config.effective_checkpoint_storage().host_path)
    return root / ctx.cluster_id / "tensorboard" / "experiment" / str(exp_id)


def write_events(app: FastAPI, exp_id: int) -> Path:
    path = tb_dir(app, exp_id)
    (path / "trial" / "1").mkdir(parents=True)
    (path / "trial" / "1" / "events.out.tfevents.1700000000.host.1.0").write_bytes(b"\x00event")
    return path


def test_the_owner_deletes_the_experiments_directory_and_nothing_else(
    client: TestClient, app: FastAPI, user: dict, admin: dict
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    other = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    mine, kept = write_events(app, exp["id"]), write_events(app, other["id"])
    neighbour = tb_dir(app, int(f"{exp['id']}0"))  # a name that starts with the id: not the experiment's
    neighbour.mkdir(parents=True)

    r = client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files", headers=user)
    assert (r.status_code, r.json()) == (200, {})
    assert not mine.exists()
    assert (kept / "trial" / "1").is_dir() and neighbour.is_dir()
    # nothing left to delete: still fine; an admin may, too
    assert client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files", headers=admin).status_code == 200


def test_only_the_owner_or_an_admin_deletes_them(client: TestClient, app: FastAPI, user: dict, admin: dict) -> None:
    exp = create_experiment(client, admin, SINGLE_CONFIG, activate=False)
    path = write_events(app, exp["id"])
    r = client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files", headers=user)
    assert r.status_code == 403 and "owner" in r.json()["message"]
    assert path.is_dir()
    assert client.delete("/api/v1/experiments/999999/tensorboard-files", headers=admin).status_code == 404
    assert client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files").status_code == 401
    assert path.is_dir()


def test_a_link_out_of_the_storage_is_left_alone(client: TestClient, app: FastAPI, user: dict, tmp_path: Path) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "precious").mkdir(parents=True)
    link = tb_dir(app, exp["id"])
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere)
    r = client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files", headers=user)
    assert r.status_code == 403 and "symbolic link" in r.json()["message"]
    assert (elsewhere / "precious").is_dir() and link.is_symlink()


class BrokenStorage:
    def __init__(self, _config: Mapping[str, Any]) -> None:
        pass

    def delete(self, uuid: str) -> None:
        raise Unavailable("the storage is down")


def test_a_storage_failure_is_unavailable_naming_it(client: TestClient, app: FastAPI, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    path = write_events(app, exp["id"])
    with ctx_of(app).db.read_session() as s:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
    broken: Any = BrokenStorage
    with pytest.raises(Unavailable, match="the storage is down"):
        tensorboard_files.delete(ctx_of(app), Caller(owner), exp["id"], storage_for=broken)
    assert path.is_dir()


def test_tensorboard_files_in_s3_are_deleted_from_the_bucket(
    client: TestClient, app: FastAPI, user: dict, moto_endpoint: str
) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="tb-bucket")
    config = (
        SINGLE_CONFIG + f"checkpoint_storage: {{type: s3, bucket: tb-bucket, prefix: runs, "
        f"endpoint_url: '{moto_endpoint}'}}\n"
    )
    exp = create_experiment(client, user, config, activate=False)
    base = f"runs/{ctx_of(app).cluster_id}/tensorboard/experiment"
    doomed = [f"{base}/{exp['id']}/trial/1/events.out.tfevents.1", f"{base}/{exp['id']}/trial/2/events.out.tfevents.2"]
    kept = [f"{base}/{exp['id']}0/trial/3/events.out.tfevents.3", "runs/some-checkpoint/state.json"]
    for key in doomed + kept:
        s3.put_object(Bucket="tb-bucket", Key=key, Body=b"x")

    r = client.delete(f"/api/v1/experiments/{exp['id']}/tensorboard-files", headers=user)
    assert r.status_code == 200, r.text
    left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="tb-bucket").get("Contents", []))
    assert left == sorted(kept)


def test_deleting_the_experiment_deletes_its_tensorboard_files(
    client: TestClient, app: FastAPI, user: dict, agent: FakeAgent
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    agent.exit(task.allocation_id, 0)
    other = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    mine, kept = write_events(app, exp["id"]), write_events(app, other["id"])
    assert client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()["experiment"]["state"] == (
        "STATE_COMPLETED"
    )
    assert client.delete(f"/api/v1/experiments/{exp['id']}", headers=user).status_code == 200
    app.state.experiment_deletion.run_pending()
    assert client.get(f"/api/v1/experiments/{exp['id']}", headers=user).status_code == 404
    assert not mine.exists() and kept.is_dir()


def test_a_failure_to_delete_them_fails_the_experiments_deletion(
    client: TestClient, app: FastAPI, user: dict, agent: FakeAgent
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    agent.exit(task.allocation_id, 0)
    write_events(app, exp["id"])

    class FailsOnTensorBoard:
        def __init__(self, real: CheckpointStorage) -> None:
            self.real = real

        def delete(self, uuid: str) -> None:
            raise Unavailable(f"cannot delete {uuid}: the storage is down")

    deleter = app.state.experiment_deletion
    deleter.storage_for = lambda config: FailsOnTensorBoard(config)  # no checkpoints: only the directory
    assert client.delete(f"/api/v1/experiments/{exp['id']}", headers=user).status_code == 200
    deleter.run_pending()
    shown = client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()["experiment"]
    assert shown["state"] == "STATE_DELETE_FAILED"
    assert f"TensorBoard directory of experiment {exp['id']}" in shown["endReason"]
    assert "the storage is down" in shown["endReason"]
