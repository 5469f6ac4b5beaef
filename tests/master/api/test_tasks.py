"""Tasks and allocations over the API: the task list det reads, the model definition a task
downloads, preemption signals and logs a task posts itself."""

from __future__ import annotations

import base64
import json

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    bearer,
    create_experiment,
    file_entry,
    post,
)


def summaries(client: TestClient, headers: dict) -> dict[str, dict]:
    r = client.get("/api/v1/tasks", headers=headers)
    assert r.status_code == 200
    return r.json()["allocationIdToSummary"]


def test_empty_task_list(client: TestClient, user: dict) -> None:
    assert summaries(client, user) == {}


def test_every_summary_has_registered_time(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, GRID_CONFIG)  # two trials, one slot: one runs, one waits
    [running] = agent.start_all()
    out = summaries(client, user)
    assert len(out) == 2
    for alloc_id, s in out.items():
        assert s["registeredTime"], s
        assert s["allocationId"] == alloc_id
        for key in (
            "taskId",
            "name",
            "slotsNeeded",
            "resources",
            "resourcePool",
            "priority",
            "schedulerType",
            "proxyPorts",
        ):
            assert key in s, key
    ran = out[running.allocation_id]
    assert ran["state"] == "STATE_RUNNING"
    [res] = ran["resources"]
    assert list(res["agentDevices"]) == ["agent-1"]
    assert res["agentDevices"]["agent-1"]["devices"][0]["type"] == "TYPE_CPU"
    waiting = next(s for a, s in out.items() if a != running.allocation_id)
    assert waiting["state"] == "STATE_QUEUED" and waiting["resources"] == []


def test_agent_list_shows_the_running_task(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    [a] = client.get("/api/v1/agents", headers=user).json()["agents"]
    assert a["id"] == "agent-1"
    assert a["registeredTime"]
    assert a["slotStats"]["typeStats"]["TYPE_CPU"]["total"] == 1
    assert a["slots"]["0"]["container"]["id"] == task.allocation_id
    assert list(a["containers"]) == [task.allocation_id]


def test_legacy_tasks_route_is_the_map_alone(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    agent.start_all()
    r = client.get("/tasks", headers=user)
    assert r.status_code == 200 and r.headers["content-type"] == "application/json", r.text
    assert r.json() == summaries(client, user) and len(r.json()) == 1
    assert client.get("/tasks").status_code == 401


def test_finished_allocations_leave_the_list(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    agent.exit(task.allocation_id, 0)
    assert summaries(client, user) == {}


def test_context_directory_with_the_task_token(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG, files=[file_entry("train.py", b"print(1)\n")])
    [task] = agent.start_all()
    r = client.get(f"/api/v1/tasks/{task.task_id}/context_directory", headers=bearer(task.token))
    assert r.status_code == 200
    assert base64.b64decode(r.json()["b64Tgz"])[:2] == b"\x1f\x8b"  # gzip


def test_context_directory_of_another_task_is_403(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, GRID_CONFIG)
    [task] = agent.start_all()
    other = next(s["taskId"] for s in summaries(client, user).values() if s["taskId"] != task.task_id)
    r = client.get(f"/api/v1/tasks/{other}/context_directory", headers=bearer(task.token))
    assert r.status_code == 403


def test_context_directory_of_unknown_task_is_404(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/tasks/99.99/context_directory", headers=user).status_code == 404


def test_preemption_signal_after_pause(client: TestClient, user: dict, agent: FakeAgent) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    url = f"/api/v1/allocations/{task.allocation_id}/signals/preemption"
    h = bearer(task.token)
    assert client.get(f"{url}?timeout_seconds=0", headers=h).json() == {"preempt": False}
    assert client.get(url, headers=h).json() == {"preempt": False}
    post(client, f"/api/v1/experiments/{exp['id']}/pause", None, user)
    # a long poll answers at once when the signal is already set
    assert client.get(f"{url}?timeout_seconds=60", headers=h).json() == {"preempt": True}
    assert post(client, f"/api/v1/allocations/{task.allocation_id}/signals/ack_preemption", {}, h).status_code == 200
    agent.exit(task.allocation_id, 0)
    trials = client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]
    # the single trial had no target reached, so it waits paused rather than completing
    assert trials[0]["state"] == "STATE_PAUSED"


def test_preemption_long_poll_times_out(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    r = client.get(
        f"/api/v1/allocations/{task.allocation_id}/signals/preemption?timeout_seconds=1", headers=bearer(task.token)
    )
    assert r.json() == {"preempt": False}


def test_preemption_of_unknown_allocation_is_404(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/allocations/nope/signals/preemption", headers=user).status_code == 404
    assert post(client, "/api/v1/allocations/nope/signals/ack_preemption", None, user).status_code == 404


def test_task_posts_its_own_logs(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    body = {
        "logs": [
            {"taskId": task.task_id, "log": "from the task", "timestamp": None, "level": "LOG_LEVEL_INFO"},
            {"taskId": task.task_id, "log": "warned\n", "level": "LOG_LEVEL_WARNING"},
        ]
    }
    assert post(client, "/api/v1/task/logs", body, bearer(task.token)).status_code == 200
    text = client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false", headers=user).text
    lines = [json.loads(line)["result"] for line in text.splitlines()]
    assert [(ln["message"], ln["level"]) for ln in lines] == [
        ("from the task\n", "LOG_LEVEL_INFO"),
        ("warned\n", "LOG_LEVEL_WARNING"),
    ]


def test_task_cannot_post_logs_for_another_task(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, GRID_CONFIG)
    [task] = agent.start_all()
    other = next(s for s in summaries(client, user).values() if s["taskId"] != task.task_id)
    body = {"logs": [{"taskId": other["taskId"], "log": "forged"}]}
    assert post(client, "/api/v1/task/logs", body, bearer(task.token)).status_code == 403
    # nor may a user token: a task's logs come from the task
    assert post(client, "/api/v1/task/logs", body, user).status_code == 403


def test_an_orphaned_task_of_a_lost_agent_is_fenced_off(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock
) -> None:
    """An agent stopped past the reconnect wait is lost and its trial restarts elsewhere; its old
    process may still run. Its token must die with the allocation, even though it is cached."""
    ctx = app.state.ctx
    first = FakeAgent(app, "agent-1", slots=1)
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = first.start_all()
    h = bearer(task.token)
    metrics = {
        "group": "training",
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": 1,
            "metrics": {"avgMetrics": {"loss": 1.0}},
        },
    }
    assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", metrics, h).status_code == 200  # now cached
    first.close()  # the agent stops answering
    ctx.controller.agent_disconnected("agent-1", "stopped")
    clock.advance(ctx.config.agent_reconnect_wait + 1)
    ctx.controller.tick()
    second = FakeAgent(app, "agent-2", slots=1)
    [rerun] = second.start_all()
    assert rerun.trial_id == task.trial_id and rerun.allocation_id != task.allocation_id
    metrics["metrics"]["stepsCompleted"] = 2
    for method, path, body in (
        ("POST", f"/api/v1/trials/{task.trial_id}/metrics", metrics),
        ("POST", f"/api/v1/trials/{task.trial_id}/progress", {"progress": 0.9}),
        ("POST", "/api/v1/task/logs", {"logs": [{"taskId": task.task_id, "log": "orphan"}]}),
        ("GET", f"/api/v1/allocations/{task.allocation_id}/signals/preemption", None),
    ):
        r = client.get(path, headers=h) if method == "GET" else post(client, path, body, h)
        assert r.status_code == 401, (path, r.text)
    steps = [
        m["stepsCompleted"]
        for m in client.get(f"/api/v1/trials/{task.trial_id}/metrics", headers=user).json()["metrics"]
    ]
    assert steps == [1]
    assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", metrics, bearer(rerun.token)).status_code == 200
    second.close()
