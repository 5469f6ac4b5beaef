"""Launching a TensorBoard: the experiments and trials it shows must exist (404 naming the field), at least
one is asked for and at most so many (400 naming the field); trials bring their experiments; what the agent
is asked to run (TensorBoard through the launcher and tensorboard_runs.py) and the plan in its context."""

from __future__ import annotations

import base64
import io
import json
import tarfile

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import update

from pedl.master.db import models
from pedl.master.lifecycle import tensorboard_tasks
from pedl.master.lifecycle.tensorboard_tasks import storage_root
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, bearer, create_experiment, ctx_of, post
from tests.master.other_users import make_user


def launch(client: TestClient, headers: dict, **body) -> tuple[int, dict]:
    r = post(client, "/api/v1/tensorboards", body, headers)
    return r.status_code, r.json()


def trial_ids(client: TestClient, headers: dict, exp_id: int) -> list[int]:
    return [t["id"] for t in client.get(f"/api/v1/experiments/{exp_id}/trials", headers=headers).json()["trials"]]


def test_at_least_one_experiment_or_trial_is_asked_for(client: TestClient, user: dict) -> None:
    status, body = launch(client, user)
    assert status == 400 and "experimentIds" in body["message"] and "trialIds" in body["message"], body
    status, body = launch(client, user, experimentIds=[], trialIds=None)  # det sends null for a list not given
    assert status == 400 and "experimentIds" in body["message"], body


def test_unknown_experiments_and_trials_are_404s_naming_the_field(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    status, body = launch(client, user, experimentIds=[exp["id"], 9999])
    assert status == 404 and body["message"].startswith("experimentIds:") and "9999" in body["message"], body
    status, body = launch(client, user, trialIds=[8888])
    assert status == 404 and body["message"].startswith("trialIds:") and "8888" in body["message"], body
    assert client.get("/api/v1/tensorboards", headers=user).json()["tensorboards"] == []  # nothing was started


def test_the_counts_are_bounded(client: TestClient, user: dict) -> None:
    status, body = launch(client, user, experimentIds=list(range(1, tensorboard_tasks.MAX_EXPERIMENTS + 2)))
    assert status == 400 and body["message"].startswith("experimentIds:"), body
    status, body = launch(client, user, trialIds=list(range(1, tensorboard_tasks.MAX_TRIALS + 2)))
    assert status == 400 and body["message"].startswith("trialIds:"), body
    status, body = launch(client, user, experimentIds=list(range(1, 1002)))  # over the body's own limit
    assert status == 400 and "experimentIds" in body["message"], body


def test_trials_bring_their_experiments(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, GRID_CONFIG, activate=False)
    first = trial_ids(client, user, exp["id"])[0]
    status, body = launch(client, user, experimentIds=None, trialIds=[first, first])
    assert status == 200, body
    tb = body["tensorboard"]
    assert tb["experimentIds"] == [exp["id"]] and tb["trialIds"] == [first]
    assert tb["description"] == f"TensorBoard (Experiment {exp['id']})"
    assert tb["serviceAddress"] == f"/proxy/{tb['id']}/"
    assert body["config"]["resources"]["slots"] == 0


def _context(client: TestClient, token: str, task_id: str) -> dict[str, bytes]:
    r = client.get(f"/api/v1/tasks/{task_id}/context_directory", headers=bearer(token))
    assert r.status_code == 200, r.text
    with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.json()["b64Tgz"]))) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_the_task_runs_tensorboard_through_the_launcher_with_its_plan(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    grid = create_experiment(client, user, GRID_CONFIG, activate=False)
    single = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    grid_trials = trial_ids(client, user, grid["id"])
    single_trial = trial_ids(client, user, single["id"])[0]
    status, body = launch(
        client,
        user,
        experimentIds=[grid["id"]],
        trialIds=[single_trial],
        config={"tensorboard_args": ["--samples_per_plugin=scalars=50"]},
    )
    assert status == 200, body
    tb = body["tensorboard"]
    assert tb["experimentIds"] == [grid["id"], single["id"]]
    [task] = agent.start_all()
    argv = task.message["entrypoint"]
    assert argv[:4] == ["python3", ".pedl/service_launcher.py", "--http", f"/proxy/{tb['id']}/"]
    tensorboard = argv[argv.index("--") + 1 :]
    assert tensorboard[:4] == ["python3", ".pedl/tensorboard_runs.py", "--plan", ".pedl/tensorboard.json"]
    assert f"--path_prefix=/proxy/{tb['id']}" in tensorboard and "{port}" in tensorboard
    assert tensorboard[-1] == "--samples_per_plugin=scalars=50"
    assert task.message["env"]["DET_TASK_TYPE"] == "TENSORBOARD"
    files = _context(client, task.token, tb["id"])
    assert {".pedl/service_launcher.py", ".pedl/tensorboard_runs.py", ".pedl/tensorboard.json"} <= set(files)
    root = storage_root({"checkpoint_storage": ctx_of(app).config.effective_checkpoint_storage().model_dump()})
    assert root is not None
    assert json.loads(files[".pedl/tensorboard.json"]) == {
        "experiments": [
            {"id": grid["id"], "storage_root": root, "trials": sorted(grid_trials)},
            {"id": single["id"], "storage_root": root, "trials": [single_trial]},
        ]
    }


def test_an_experiment_with_many_trials_shows_its_best(
    app: FastAPI, client: TestClient, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    three = GRID_CONFIG.replace("vals: [0.1, 0.2]", "vals: [0.1, 0.2, 0.3]")
    exp = create_experiment(client, user, three, activate=False)
    ids = sorted(trial_ids(client, user, exp["id"]))
    assert len(ids) == 3
    with ctx_of(app).db.session() as s:  # the second trial best, the first without a metric
        for trial_id, best in zip(ids, (None, 0.1, 0.5), strict=True):
            s.execute(update(models.Trial).where(models.Trial.id == trial_id).values(best_metric=best))
        s.commit()
    monkeypatch.setattr(tensorboard_tasks, "TRIALS_PER_EXPERIMENT", 2)
    with ctx_of(app).db.read_session() as s:
        assert tensorboard_tasks.best_trials(s, s.get(models.Experiment, exp["id"])) == [ids[1], ids[2]]
        bigger = s.get(models.Experiment, exp["id"])
        bigger.config = {**bigger.config, "searcher": {**bigger.config["searcher"], "smaller_is_better": False}}
        monkeypatch.setattr(tensorboard_tasks, "TRIALS_PER_EXPERIMENT", 1)
        assert tensorboard_tasks.best_trials(s, bigger) == [ids[2]]


def test_the_storage_root_of_shared_fs_only() -> None:
    assert (
        storage_root({"checkpoint_storage": {"type": "shared_fs", "host_path": "/data", "storage_path": "ck"}})
        == "/data/ck"
    )
    assert storage_root({"checkpoint_storage": {"host_path": "/data/"}}) == "/data"
    assert storage_root({"checkpoint_storage": {"type": "s3", "bucket": "b"}}) is None
    assert storage_root({}) is None
    # directory storage: where the master (and a process task) finds it
    assert (
        storage_root({"checkpoint_storage": {"type": "directory", "container_path": "/c", "host_path": "/mnt/c"}})
        == "/mnt/c"
    )


def test_it_inherits_the_pod_spec_and_shows_the_image_per_device(client: TestClient, user: dict) -> None:
    """As Determined's: `det tensorboard config` shows the experiment's image pull secrets, and an image
    given as one name as {cpu, cuda, rocm}."""
    secrets = [{"name": "ips"}]
    exp = create_experiment(
        client,
        user,
        SINGLE_CONFIG + f"environment: {{pod_spec: {{spec: {{imagePullSecrets: {json.dumps(secrets)}}}}}}}\n",
        activate=False,
    )
    status, body = launch(client, user, experimentIds=[exp["id"]])
    assert status == 200, body
    assert body["config"]["environment"]["pod_spec"]["spec"]["imagePullSecrets"] == secrets
    status, body = launch(client, user, experimentIds=[exp["id"]], config={"environment": {"image": "python:3.8.16"}})
    assert status == 200, body
    image = body["config"]["environment"]["image"]
    assert image == {"cpu": "python:3.8.16", "cuda": "python:3.8.16", "rocm": "python:3.8.16"}, image
    shown = client.get(f"/api/v1/tensorboards/{body['tensorboard']['id']}", headers=user).json()
    assert shown["config"]["environment"]["image"] == image


def test_it_inherits_only_the_image_registry_auth_and_storage_never_variables_or_mounts(
    app: FastAPI, client: TestClient, user: dict, admin: dict, agent: FakeAgent
) -> None:
    """bob's experiment sets variables (PYTHONPATH: a directory he fills) and bind mounts; alice's TensorBoard of
    it takes, as Determined's does, only the newest experiment's image (and its pull secrets), its
    registry_auth and the storage mount: none of bob's variables or mounts reach her task."""
    bob = make_user(client, admin, "bob")
    alice = make_user(client, admin, "alice")
    auth = {"username": "bob", "password": "secret", "serveraddress": "registry.example"}
    older = create_experiment(client, bob, SINGLE_CONFIG + "environment: {image: old:1}\n", activate=False)
    config = SINGLE_CONFIG + (
        "environment: {image: new:2, environment_variables: [PYTHONPATH=/home/bob/evil, "
        f"FROM_EXP=1], registry_auth: {json.dumps(auth)}, "
        "pod_spec: {spec: {imagePullSecrets: [{name: ips}], hostNetwork: true}}}\n"
        "bind_mounts: [{host_path: /home/bob, container_path: /usr/lib/python3}]\n"
    )
    newer = create_experiment(client, bob, config, activate=False)
    root = storage_root({"checkpoint_storage": ctx_of(app).config.effective_checkpoint_storage().model_dump()})
    status, body = launch(
        client,
        alice,
        experimentIds=[newer["id"], older["id"]],
        config={"bind_mounts": [{"host_path": "/elsewhere", "container_path": "/mine"}]},
    )
    assert status == 200, body
    environment = body["config"]["environment"]
    assert environment["image"] == {"cpu": "new:2", "cuda": "new:2", "rocm": "new:2"}  # the newest experiment's
    assert environment["registry_auth"]["username"] == "bob"
    assert environment["pod_spec"] == {"spec": {"imagePullSecrets": [{"name": "ips"}]}}
    assert environment["environment_variables"] == []
    assert [(m["host_path"], m["container_path"], m["read_only"]) for m in body["config"]["bind_mounts"]] == [
        ("/elsewhere", "/mine", False),
        (root, root, True),
    ]
    # as a process on the agent (bob's experiment names no image): what the agent is sent holds none of it
    plain = create_experiment(
        client,
        bob,
        SINGLE_CONFIG
        + (
            "environment: {environment_variables: [PYTHONPATH=/home/bob/evil]}\n"
            "bind_mounts: [{host_path: /home/bob, container_path: /usr/lib/python3}]\n"
        ),
        activate=False,
    )
    status, body = launch(client, alice, experimentIds=[plain["id"]])
    assert status == 200, body
    [task] = agent.start_all()
    assert task.message["container"] is None and "PYTHONPATH" not in task.message["env"]
    assert [m["host_path"] for m in task.message["bind_mounts"]] == [root]
    # the request's own image and registry_auth win; its variables are its own
    status, body = launch(
        client,
        alice,
        experimentIds=[newer["id"]],
        config={
            "environment": {
                "image": "mine:3",
                "environment_variables": ["MINE=2"],
                "registry_auth": {**auth, "username": "alice"},
            }
        },
    )
    assert status == 200, body
    environment = body["config"]["environment"]
    assert environment["image"]["cpu"] == "mine:3" and environment["environment_variables"] == ["MINE=2"]
    assert environment["registry_auth"]["username"] == "alice" and environment.get("pod_spec") is None
