"""POST /api/v1/allocations/{id}/checkpoint_gc refuses all but the GC task's own live token and the
checkpoints it was given, each problem a 4xx naming the field, and marks nothing when it refuses."""

from __future__ import annotations

import uuid as uuid_lib

import pytest
from fastapi.testclient import TestClient

from tests.master.fakes import FakeAgent, StartedTask, bearer, post
from tests.master.gc_task_world import delete, report, shown, start_trial, stored


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    return start_trial(client, user, agent)


def test_only_the_gc_tasks_own_live_token_and_its_checkpoints(
    client: TestClient, user: dict, admin: dict, agent: FakeAgent, task: StartedTask
) -> None:
    name, other = stored(client, task, 2), stored(client, task, 4)
    assert delete(client, user, name).status_code == 200
    [gc] = agent.start_all()
    path = f"/api/v1/allocations/{gc.allocation_id}/checkpoint_gc"
    body = {"checkpoints": [{"uuid": name, "resources": {}}]}
    assert post(client, path, body, user).status_code == 403  # a user token, even the owner's
    assert post(client, path, body, admin).status_code == 403
    assert post(client, path, body, bearer(task.token)).status_code == 403  # another allocation's token
    r = report(client, gc, {other: {}})  # a checkpoint this task was not given
    assert r.status_code == 403 and r.json()["fields"][0]["field"] == "checkpoints[0].uuid", r.text
    r = post(client, path, {"checkpoints": [{"uuid": "x", "resources": {}}]}, bearer(gc.token))
    assert r.status_code == 400 and "checkpoints" in r.text
    r = post(client, path, {"checkpoints": [{"uuid": name, "resources": {"a": -1}}]}, bearer(gc.token))
    assert r.status_code == 400 and "resources" in r.text
    r = post(client, path, {"checkpoints": [{"uuid": name, "resources": {}}] * 2}, bearer(gc.token))
    assert r.status_code == 400 and "checkpoints" in r.text
    assert post(client, path, {}, bearer(gc.token)).status_code == 400  # checkpoints is required
    assert shown(client, user, name)["state"] == "STATE_PARTIALLY_DELETED"  # held; nothing marked by a refusal
    assert shown(client, user, other)["state"] == "STATE_COMPLETED"
    agent.exit(gc.allocation_id, 0)
    assert report(client, gc, {name: {}}).status_code == 401  # an ended allocation's token is revoked
    assert shown(client, user, name)["state"] == "STATE_PARTIALLY_DELETED"


def test_a_trials_own_token_is_no_gc_tasks(client: TestClient, task: StartedTask) -> None:
    r = post(
        client,
        f"/api/v1/allocations/{task.allocation_id}/checkpoint_gc",
        {"checkpoints": [{"uuid": str(uuid_lib.uuid4()), "resources": {}}]},
        bearer(task.token),
    )
    assert r.status_code == 403
