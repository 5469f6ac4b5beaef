"""Deleting an experiment: DELETE answers {} with the experiment DELETING, the worker deletes its
checkpoints' files (shared_fs and S3) and then every row of it in bounded transactions; only ended
experiments are deleted; a failure leaves DELETE_FAILED with the reason and deleting again retries; a
master restarted mid-deletion finishes it; checkpoints registered as model versions block it."""

from __future__ import annotations

import threading
import uuid as uuid_lib
from collections.abc import Iterator, Mapping
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.master_config import MasterConfig
from pedl.devcluster import wait_for
from pedl.errors import Unavailable
from pedl.master.app import create_app
from pedl.master.db import models
from pedl.master.experiments import purge as experiment_purge
from pedl.master.lifecycle.states import ExperimentState
from pedl.master.lifecycle.transitions import set_experiment_state
from pedl.master.workers.experiment_deletion import ExperimentDeleter
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, ctx_of, post
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401


@pytest.fixture
def master_config(master_config: MasterConfig, moto_server: str) -> MasterConfig:
    """The shared config, with the bucket of the s3 test (on moto) allowed as a storage root."""
    security = master_config.security.model_copy(
        update={"checkpoint_storage_roots": ["s3://del-bucket"], "s3_endpoint_urls": [moto_server]}
    )
    # the fake agent runs no checkpoint GC task: these tests drive the master-side path
    return master_config.model_copy(update={"security": security, "checkpoint_gc_tasks": False})


@pytest.fixture
def fake(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    agent = FakeAgent(app, "agent-1", slots=2)
    yield agent
    agent.close()


@pytest.fixture
def deleter(app: FastAPI) -> ExperimentDeleter:
    return app.state.experiment_deletion


def storage(app: FastAPI, config: Mapping[str, Any] | None = None) -> CheckpointStorage:
    return storage_from_config(config or ctx_of(app).config.effective_checkpoint_storage().model_dump())


def report(
    client: TestClient, app: FastAPI, task: StartedTask, steps: int, config: Mapping[str, Any] | None = None
) -> str:
    """A checkpoint with a file, a validation at its step and a log line, as a trial reports them."""
    name = str(uuid_lib.uuid4())
    store = storage(app, config)
    with store.store_path(name) as path:
        (path / "state.json").write_text(f'{{"step": {steps}}}')
    headers = bearer(task.token)
    body = {
        "group": "validation",
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": {"loss": 1.0 / steps}},
        },
    }
    assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, headers).status_code == 200
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
        headers,
    )
    assert r.status_code == 200, r.text
    logs = {"logs": [{"taskId": task.task_id, "log": f"step {steps}"}]}
    assert post(client, "/api/v1/task/logs", logs, headers).status_code == 200
    return name


def completed(
    client: TestClient,
    app: FastAPI,
    user: dict,
    fake: FakeAgent,
    config: str = SINGLE_CONFIG,
    storage_config: Mapping[str, Any] | None = None,
) -> tuple[int, list[str]]:
    exp = create_experiment(client, user, config)
    [task] = fake.start_all()
    names = [report(client, app, task, steps, storage_config) for steps in (2, 4)]
    fake.exit(task.allocation_id, 0)
    assert state(client, user, exp["id"]) == "STATE_COMPLETED"
    return exp["id"], names


def state(client: TestClient, headers: dict, exp_id: int) -> str | None:
    r = client.get(f"/api/v1/experiments/{exp_id}", headers=headers)
    return r.json()["experiment"]["state"] if r.status_code == 200 else None


def rows_left(app: FastAPI, exp_id: int) -> dict[str, int]:
    """Rows of every table that still belong to the experiment."""
    T = models.Trial
    with ctx_of(app).db.read_session() as s:
        trials = select(T.id).where(T.experiment_id == exp_id).scalar_subquery()

        def count(q) -> int:
            return s.scalar(select(func.count()).select_from(q.subquery())) or 0

        return {
            "experiments": count(select(models.Experiment.id).where(models.Experiment.id == exp_id)),
            "model_definitions": count(
                select(models.ModelDefinition.experiment_id).where(models.ModelDefinition.experiment_id == exp_id)
            ),
            "trials": count(select(T.id).where(T.experiment_id == exp_id)),
            "metrics": count(select(models.Metric.id).where(models.Metric.trial_id.in_(trials))),
            "checkpoints": count(select(models.Checkpoint.uuid).where(models.Checkpoint.experiment_id == exp_id)),
            "task_logs": count(select(models.TaskLog.id).where(models.TaskLog.trial_id.in_(trials))),
            "allocations": count(select(models.Allocation.id).where(models.Allocation.trial_id.in_(trials))),
            "digest marks": count(
                select(models.MetricDigestMark.trial_id).where(models.MetricDigestMark.trial_id.in_(trials))
            ),
            "experiment events": count(
                select(models.Event.id).where(
                    models.Event.entity_type == "experiment", models.Event.entity_id == str(exp_id)
                )
            ),
        }


class HeldStorage:
    """A storage whose delete waits until released (or fails, when told to)."""

    def __init__(self, real: CheckpointStorage) -> None:
        self.real = real
        self.release = threading.Event()
        self.fail = False
        self.deleted: list[str] = []

    def __call__(self, _config: Mapping[str, Any]) -> HeldStorage:
        return self

    def delete(self, uuid: str) -> None:
        assert self.release.wait(30), "never released"
        if self.fail:
            raise Unavailable("the storage is down")
        self.real.delete(uuid)
        self.deleted.append(uuid)


KEEP_ALL = SINGLE_CONFIG + "checkpoint_storage: {save_trial_latest: 5}\n"  # garbage collection deletes none


def test_delete_answers_at_once_then_the_worker_deletes_files_and_rows(
    client: TestClient,
    app: FastAPI,
    user: dict,
    fake: FakeAgent,
    deleter: ExperimentDeleter,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exp_id, names = completed(client, app, user, fake, KEEP_ALL)
    other_id, other_names = completed(client, app, user, fake, KEEP_ALL)
    held = HeldStorage(storage(app))
    deleter.storage_for = held
    monkeypatch.setattr(experiment_purge, "BATCH", 2)  # several transactions per table

    r = client.delete(f"/api/v1/experiments/{exp_id}", headers=user)
    assert (r.status_code, r.json()) == (200, {})
    assert state(client, user, exp_id) == "STATE_DELETING"
    again = client.delete(f"/api/v1/experiments/{exp_id}", headers=user)  # already on its way: nothing new
    assert again.status_code == 200
    # its checkpoints are no longer served: the worker is about to delete their files
    r = client.get(f"/api/v1/checkpoints/{names[0]}/download", headers=user)
    assert r.status_code == 409 and "is being deleted" in r.json()["message"], r.text

    held.release.set()
    deleter.run_pending()
    assert client.get(f"/api/v1/experiments/{exp_id}", headers=user).status_code == 404
    assert sorted(held.deleted) == sorted([*names, str(exp_id)])  # then its TensorBoard directory
    assert not any(storage(app).exists(n) for n in names)
    assert set(rows_left(app, exp_id).values()) == {0}, rows_left(app, exp_id)
    # the other experiment keeps everything
    assert state(client, user, other_id) == "STATE_COMPLETED"
    assert all(storage(app).exists(n) for n in other_names)
    assert rows_left(app, other_id)["metrics"] == 2 and rows_left(app, other_id)["checkpoints"] == 2


@pytest.mark.parametrize("action", [None, "pause"])
def test_an_experiment_that_has_not_ended_is_refused_naming_its_state(
    client: TestClient, user: dict, fake: FakeAgent, action: str | None
) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    fake.start_all()
    if action:
        assert post(client, f"/api/v1/experiments/{exp['id']}/{action}", None, user).status_code == 200
    before = state(client, user, exp["id"])
    r = client.delete(f"/api/v1/experiments/{exp['id']}", headers=user)
    assert r.status_code == 400
    assert before.removeprefix("STATE_") in r.json()["message"] and "ended" in r.json()["message"]
    assert state(client, user, exp["id"]) == before


def test_only_the_owner_or_an_admin_deletes(
    client: TestClient, app: FastAPI, user: dict, admin: dict, fake: FakeAgent, deleter: ExperimentDeleter
) -> None:
    exp_id, _ = completed(client, app, admin, fake)
    r = client.delete(f"/api/v1/experiments/{exp_id}", headers=user)
    assert r.status_code == 403 and state(client, admin, exp_id) == "STATE_COMPLETED"
    assert client.delete("/api/v1/experiments/999999", headers=admin).status_code == 404


def test_a_failure_leaves_delete_failed_with_the_reason_and_deleting_again_retries(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent, deleter: ExperimentDeleter
) -> None:
    exp_id, names = completed(client, app, user, fake, KEEP_ALL)
    held = HeldStorage(storage(app))
    held.fail = True
    held.release.set()
    deleter.storage_for = held
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=user).status_code == 200
    deleter.run_pending()
    shown = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
    assert shown["state"] == "STATE_DELETE_FAILED"
    assert "the storage is down" in shown["endReason"] and "could not delete the files" in shown["endReason"]
    assert rows_left(app, exp_id)["checkpoints"] == 2  # nothing stored is lost on a failure
    assert post(client, f"/api/v1/experiments/{exp_id}/activate", None, user).status_code == 409

    held.fail = False
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=user).status_code == 200
    deleter.run_pending()
    assert state(client, user, exp_id) is None
    assert not any(storage(app).exists(n) for n in names)


def test_a_restarted_master_finishes_a_deletion(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent, master_config: MasterConfig
) -> None:
    exp_id, names = completed(client, app, user, fake)
    # as a master that stopped after marking it: DELETING, the worker never ran
    with ctx_of(app).db.session() as s:
        exp = s.get(models.Experiment, exp_id)
        set_experiment_state(s, ctx_of(app).clock.now(), exp, ExperimentState.DELETING, "deletion requested")
    restarted = create_app(master_config, clock=ctx_of(app).clock)
    with TestClient(restarted):  # its lifespan starts the worker, whose first pass sweeps
        wait_for(lambda: rows_left(app, exp_id)["experiments"] == 0, 20, interval=0.05, what="the restarted worker")
    assert set(rows_left(app, exp_id).values()) == {0}
    assert not any(storage(app).exists(n) for n in names)


def test_the_background_worker_deletes_without_being_driven(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent
) -> None:
    exp_id, _ = completed(client, app, user, fake)
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=user).status_code == 200
    wait_for(lambda: state(client, user, exp_id) is None, 20, interval=0.05, what="the worker")


def test_checkpoints_in_s3_are_deleted_from_the_bucket(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent, deleter: ExperimentDeleter, moto_endpoint: str
) -> None:
    import boto3

    s3 = boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1")
    s3.create_bucket(Bucket="del-bucket")
    config = SINGLE_CONFIG + (
        f"checkpoint_storage: {{type: s3, bucket: del-bucket, prefix: exp, endpoint_url: '{moto_endpoint}'}}\n"
    )
    probe = create_experiment(client, user, config, activate=False)
    exp_id, names = completed(client, app, user, fake, config, probe["config"]["checkpoint_storage"])
    kept = [o["Key"] for o in s3.list_objects_v2(Bucket="del-bucket").get("Contents", [])]
    assert kept  # garbage collection keeps the trial's best and latest
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=user).status_code == 200
    deleter.run_pending()
    assert s3.list_objects_v2(Bucket="del-bucket").get("Contents", []) == []
    assert state(client, user, exp_id) is None and names


def test_checkpoints_registered_as_model_versions_block_the_deletion(
    client: TestClient, app: FastAPI, user: dict, fake: FakeAgent
) -> None:
    exp_id, names = completed(client, app, user, fake)
    now = ctx_of(app).clock.now()
    with ctx_of(app).db.session() as s:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        model = models.RegisteredModel(name="mnist", owner_id=owner.id, created_at=now, updated_at=now)
        s.add(model)
        s.flush()
        s.add(
            models.ModelVersion(
                model_id=model.id,
                version=1,
                checkpoint_uuid=names[-1],
                owner_id=owner.id,
                created_at=now,
                updated_at=now,
            )
        )
    r = client.delete(f"/api/v1/experiments/{exp_id}", headers=user)
    assert r.status_code == 400
    assert "'mnist' version 1" in r.json()["message"] and names[-1] in r.json()["message"]
    assert state(client, user, exp_id) == "STATE_COMPLETED"
