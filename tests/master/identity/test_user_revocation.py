"""Tokens die with their owner, on both databases: deactivating a user, or a new password, ends the
tokens of the user's running tasks (DET_SESSION_TOKEN and DET_USER_TOKEN) at once, cached or not, and
stops those tasks: experiments pause (no failure, no restart used) and go on once activated."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.identity.passwords import client_hash
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, login, post

TASK_ROUTES = ("/api/v1/me", "/api/v1/shells", "/api/v1/experiments")


@pytest.fixture
def alice(client: TestClient, admin: dict) -> int:
    body = {
        "user": {"username": "alice", "admin": False, "active": True},
        "password": client_hash("wonderland"),
        "isHashed": True,
    }
    r = post(client, "/api/v1/users", body, admin)
    assert r.status_code == 200, r.text
    return r.json()["user"]["id"]


@pytest.fixture
def agent(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    fake = FakeAgent(app, "agent-1", slots=1)
    yield fake
    fake.close()


def running_trial(client: TestClient, agent: FakeAgent, headers: dict) -> tuple[int, StartedTask]:
    exp = create_experiment(client, headers, SINGLE_CONFIG)
    [task] = agent.start_all()
    for token in (task.token, task.message["env"]["DET_USER_TOKEN"]):
        for route in TASK_ROUTES:  # answered (and cached) before
            assert client.get(route, headers=bearer(token)).status_code == 200, route
    return exp["id"], task


def assert_tokens_dead(client: TestClient, task: StartedTask) -> None:
    for token in (task.token, task.message["env"]["DET_USER_TOKEN"]):
        for route in TASK_ROUTES:
            r = client.get(route, headers=bearer(token))
            assert r.status_code == 401, (route, r.text)
    report = {
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": 1,
            "metrics": {"avgMetrics": {"loss": 1.0}},
        },
        "group": "training",
    }
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", report, bearer(task.token))
    assert r.status_code == 401, r.text


def experiment_state(client: TestClient, headers: dict, exp_id: int) -> str:
    return client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()["experiment"]["state"]


def test_deactivating_a_user_ends_their_task_tokens_and_pauses_their_work(
    client: TestClient, admin: dict, alice: int, agent: FakeAgent
) -> None:
    alice_headers = bearer(login(client, "alice", "wonderland"))
    exp_id, task = running_trial(client, agent, alice_headers)
    r = client.patch(f"/api/v1/users/{alice}", json={"active": False}, headers=admin)
    assert r.status_code == 200, r.text
    assert_tokens_dead(client, task)
    assert client.get("/api/v1/me", headers=alice_headers).status_code == 401
    kills = [m for m in agent.messages() if m["type"] == "kill_task"]
    assert [m["allocation_id"] for m in kills] == [task.allocation_id]
    assert experiment_state(client, admin, exp_id) == "STATE_PAUSED"
    agent.exit(task.allocation_id, exit_code=-15, reason="killed")  # SIGTERM: not a failure of the trial
    trial = client.get(f"/api/v1/trials/{task.trial_id}", headers=admin).json()["trial"]
    assert (trial["state"], trial["restarts"]) == ("STATE_PAUSED", 0)
    # back: an admin activates the user, the user the experiment; the trial goes on with a new token
    assert client.patch(f"/api/v1/users/{alice}", json={"active": True}, headers=admin).status_code == 200
    alice_headers = bearer(login(client, "alice", "wonderland"))
    assert post(client, f"/api/v1/experiments/{exp_id}/activate", {}, alice_headers).status_code == 200
    [again] = agent.start_all()
    assert again.token != task.token
    assert client.get("/api/v1/me", headers=bearer(again.token)).json()["user"]["username"] == "alice"


@pytest.mark.parametrize("route", ["patch", "password"])
def test_a_new_password_ends_the_users_task_tokens_but_not_this_session(
    client: TestClient, alice: int, agent: FakeAgent, route: str
) -> None:
    alice_headers = bearer(login(client, "alice", "wonderland"))
    exp_id, task = running_trial(client, agent, alice_headers)
    if route == "patch":  # det user edit: a fresh login changes its own password
        r = client.patch(
            f"/api/v1/users/{alice}", json={"password": client_hash("new"), "isHashed": True}, headers=alice_headers
        )
    else:
        r = post(
            client,
            f"/api/v1/users/{alice}/password",
            {"password": client_hash("new"), "isHashed": True, "oldPassword": client_hash("wonderland")},
            alice_headers,
        )
    assert r.status_code == 200, r.text
    assert_tokens_dead(client, task)
    assert client.get("/api/v1/me", headers=alice_headers).status_code == 200  # the session that changed it
    assert experiment_state(client, alice_headers, exp_id) == "STATE_PAUSED"
