"""security.bind_mounts.allowed_roots at submission: an experiment's or a task's host_path outside every root
is a 400 naming bind_mounts[i].host_path, for every kind of task; the agent is told the roots."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from pedl.config.security_config import BindMountPolicy
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of, post

OUTSIDE = {"host_path": "/etc", "container_path": "/x"}
INSIDE = {"host_path": "/data/team/x", "container_path": "/x", "read_only": True}


@pytest.fixture
def allowed(app) -> None:  # the master's app
    ctx_of(app).config.security.bind_mounts = BindMountPolicy(allowed_roots=["/data"])


def experiment(mounts: list[dict]) -> str:
    lines = "".join(f"  - {{host_path: {m['host_path']}, container_path: {m['container_path']}}}\n" for m in mounts)
    return SINGLE_CONFIG + "bind_mounts:\n" + lines


def test_an_experiment_mounting_outside_the_roots_is_refused_naming_the_field(
    client: TestClient, user: dict, allowed: None, agent: FakeAgent
) -> None:
    body = {
        "activate": True,
        "config": experiment([INSIDE, OUTSIDE]),
        "modelDefinition": [],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    r = post(client, "/api/v1/experiments", body, user)
    assert r.status_code == 400 and r.json()["fields"] == [
        {
            "field": "bind_mounts[1].host_path",
            "message": "/etc is outside the host paths this cluster allows to mount "
            "(security.bind_mounts.allowed_roots: /data)",
        }
    ], r.text
    create_experiment(client, user, experiment([INSIDE]))
    (task,) = agent.start_all()
    assert task.message["bind_mount_roots"] == ["/data"]  # the agent checks them again, resolved on its host


@pytest.mark.parametrize("kind", ["commands", "notebooks", "shells", "tensorboards"])
def test_every_kind_of_task_mounting_outside_the_roots_is_refused(
    client: TestClient, user: dict, allowed: None, kind: str
) -> None:
    body = {"config": {"bind_mounts": [INSIDE, {"host_path": "/data/../etc", "container_path": "/y"}]}}
    if kind == "commands":
        body["config"]["entrypoint"] = "true"
    if kind == "tensorboards":
        body["experimentIds"] = [create_experiment(client, user, SINGLE_CONFIG, activate=False)["id"]]
    r = post(client, f"/api/v1/{kind}", body, user)
    assert r.status_code == 400, r.text
    assert r.json()["fields"][0]["field"] == "config.bind_mounts[1].host_path", r.text


def test_no_roots_refuses_every_host_mount_and_null_allows_any(client: TestClient, user: dict, app) -> None:
    ctx_of(app).config.security.bind_mounts = BindMountPolicy(allowed_roots=[])
    r = post(client, "/api/v1/commands", {"config": {"entrypoint": "true", "bind_mounts": [INSIDE]}}, user)
    assert r.status_code == 400 and "host bind mounts are not allowed on this cluster" in r.text
    ctx_of(app).config.security.bind_mounts = BindMountPolicy()
    r = post(client, "/api/v1/commands", {"config": {"entrypoint": "true", "bind_mounts": [OUTSIDE]}}, user)
    assert r.status_code == 200, r.text
