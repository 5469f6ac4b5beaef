"""Idle notebooks (and other services) are ended: the pure decision on an injected time, and the
worker's pass over a notebook started on a fake agent with a manual clock."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.master.workers import idle_tasks
from pedl.master.workers.idle_tasks import IdleKill, IdleView, decide, idle_timeout_of
from tests.master.fakes import FakeAgent, bearer, post


def advance(clock: ManualClock, agent: FakeAgent, seconds: float) -> None:
    """Time passes; the fake agent's heartbeat keeps up (first, so no control pass finds it silent)."""
    agent.conn.last_heartbeat = clock.now() + seconds
    clock.advance(seconds)


T0 = 1_700_000_000.0


def view(task_id: str, last_used: float, timeout: float = 600.0, kind: str = "notebook") -> IdleView:
    return IdleView(task_id, f"{task_id}.1", kind, timeout, last_used)


def test_a_service_is_idle_once_its_timeout_has_passed_since_its_last_use() -> None:
    kills, next_at = decide(T0 + 600, [view("a", T0), view("b", T0 + 1), view("c", T0 + 300, timeout=60)])
    assert kills == [
        IdleKill("a", "a.1", "notebook idle for 10m (idle_timeout 10m)"),
        IdleKill("c", "c.1", "notebook idle for 5m (idle_timeout 1m)"),
    ]
    assert next_at == T0 + 601  # b's turn, one second on


def test_nothing_idle_says_when_to_look_again_and_nothing_running_says_never() -> None:
    assert decide(T0, [view("a", T0, timeout=30), view("b", T0 - 10, timeout=30)]) == ([], T0 + 20)
    assert decide(T0, []) == ([], None)
    # a use stamped after `now` (another master's clock) is not idle
    assert decide(T0, [view("a", T0 + 5, timeout=1)]) == ([], T0 + 6)


def test_the_reason_names_the_kind_and_rounds_to_seconds() -> None:
    assert idle_tasks.reason("tensorboard", 90.4, 60) == "tensorboard idle for 1m30s (idle_timeout 1m)"
    assert idle_tasks.reason("notebook", 0.2, 1) == "notebook idle for 1s (idle_timeout 1s)"


def test_idle_timeout_of_a_stored_config() -> None:
    assert idle_timeout_of({"idle_timeout": "1m30s"}) == 90.0
    assert idle_timeout_of({"idle_timeout": 5}) == 5.0
    for config in ({}, {"idle_timeout": None}, {"idle_timeout": "soon"}, {"idle_timeout": "0"}, None, []):
        assert idle_timeout_of(config) is None, config


def _kills(agent: FakeAgent) -> list[dict]:
    return [m for m in agent.messages() if m["type"] == "kill_task"]


def test_an_unused_notebook_is_killed_after_its_idle_timeout(
    app, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    ctx = app.state.ctx
    r = post(client, "/api/v1/notebooks", {"config": {"idle_timeout": "10m"}}, user)
    assert r.status_code == 200, r.text
    nb = r.json()["notebook"]["id"]
    (task,) = agent.start_all()
    # starting (no port yet) is not idle, however long it takes
    advance(clock, agent, 3600)
    idle_tasks.check(ctx)
    assert _kills(agent) == []
    r = post(client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": 20001}, bearer(task.token))
    assert r.status_code == 200, r.text  # the idle clock starts here
    advance(clock, agent, 9 * 60)
    assert idle_tasks.check(ctx) == clock.now() + 60
    assert _kills(agent) == []
    # the task's watcher says it is in use: the clock starts again
    r = post(client, f"/api/v1/allocations/{task.allocation_id}/activity", {}, bearer(task.token))
    assert r.status_code == 200, r.text
    advance(clock, agent, 9 * 60)
    idle_tasks.check(ctx)
    assert _kills(agent) == []
    # an idle report changes nothing
    assert (
        post(
            client, f"/api/v1/allocations/{task.allocation_id}/activity", {"idle": True}, bearer(task.token)
        ).status_code
        == 200
    )
    advance(clock, agent, 2 * 60)
    idle_tasks.check(ctx)
    (kill,) = _kills(agent)
    assert kill["allocation_id"] == task.allocation_id
    assert kill["reason"] == "notebook idle for 11m (idle_timeout 10m)"
    assert client.get(f"/api/v1/notebooks/{nb}", headers=user).json()["notebook"]["state"] == "STATE_TERMINATING"
    agent.exit(task.allocation_id, 0, kill["reason"])  # Jupyter ends cleanly on SIGTERM
    shown = client.get(f"/api/v1/notebooks/{nb}", headers=user).json()["notebook"]
    assert shown["state"] == "STATE_TERMINATED" and "idle for 11m" in shown["exitStatus"], shown
    logs = client.get(f"/api/v1/tasks/{nb}/logs", params={"follow": "false"}, headers=user).text
    assert "notebook idle for 11m (idle_timeout 10m): killing it" in logs


@pytest.mark.parametrize(("kind", "config"), [("notebooks", {}), ("shells", {"idle_timeout": "1m"})])
def test_never_idle_without_idle_timeout_nor_a_shell(
    app, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock, kind: str, config: dict
) -> None:
    r = post(client, f"/api/v1/{kind}", {"config": config}, user)
    assert r.status_code == 200, r.text
    (task,) = agent.start_all()
    assert (
        post(
            client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": 20001}, bearer(task.token)
        ).status_code
        == 200
    )
    advance(clock, agent, 365 * 24 * 3600)
    assert idle_tasks.check(app.state.ctx) is None
    assert _kills(agent) == []


def test_a_bad_activity_body_names_the_field(client: TestClient, agent: FakeAgent, user: dict) -> None:
    post(client, "/api/v1/notebooks", {}, user)
    (task,) = agent.start_all()
    r = post(client, f"/api/v1/allocations/{task.allocation_id}/activity", {"idle": "perhaps"}, bearer(task.token))
    assert r.status_code == 400 and "idle" in r.text, r.text
