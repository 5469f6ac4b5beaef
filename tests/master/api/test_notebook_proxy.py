"""A notebook's token: made at launch for each notebook, given to its process only in the environment,
never shown by the API, and added by the master's proxy to what it relays (the service here is an
echo on a loopback port, with a fake agent); relayed requests restart the idle clock, throttled."""

from __future__ import annotations

import base64
import io
import tarfile
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.master.db import models
from tests.master.api.test_proxy import _service_module
from tests.master.fakes import FakeAgent, bearer, post


def advance(clock: ManualClock, agent: FakeAgent, seconds: float) -> None:
    """Time passes; the fake agent's heartbeat keeps up (first, so no control pass finds it silent)."""
    agent.conn.last_heartbeat = clock.now() + seconds
    clock.advance(seconds)


@pytest.fixture
def echo() -> Iterator[int]:
    service = _service_module()
    sock, port = service.listen("127.0.0.1")
    srv, thread = service.serve_in_thread(sock)
    yield port
    srv.should_exit = True
    thread.join()
    sock.close()


def _last_activity(app, task_id: str) -> float | None:
    with app.state.ctx.db.read_session() as s:
        return s.get(models.GenericTask, task_id).last_activity


def test_each_notebook_gets_a_token_of_its_own_in_its_environment_only(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    ids = [
        post(
            client, "/api/v1/notebooks", {"config": {"idle_timeout": "2m", "notebook_idle_type": "activity"}}, user
        ).json()
        for _ in range(2)
    ]
    tasks = sorted(
        FakeAgent.start_all(agent) + FakeAgent.start_all(FakeAgent(client.app, "agent-2")), key=lambda t: t.task_id
    )
    assert len(tasks) == 2
    tokens = [t.message["env"]["JUPYTER_TOKEN"] for t in tasks]
    assert len(set(tokens)) == 2 and all(len(t) >= 32 for t in tokens)
    for task, token in zip(tasks, tokens, strict=True):
        msg = task.message
        assert msg["entrypoint"][:2] == ["python3", ".pedl/notebook_launcher.py"]
        assert not any(token in arg for arg in msg["entrypoint"])  # argv is readable by anyone on the host
        assert msg["env"]["PEDL_NOTEBOOK_IDLE_TYPE"] == "activity"
        assert msg["env"]["PEDL_ACTIVITY_REPORT_SECONDS"] == "30"
        for path in (f"/api/v1/notebooks/{task.task_id}", f"/api/v1/tasks/{task.task_id}", "/api/v1/notebooks"):
            assert token not in client.get(path, headers=user).text
        r = client.get(f"/api/v1/tasks/{task.task_id}/context_directory", headers=bearer(task.token))
        with tarfile.open(fileobj=io.BytesIO(base64.b64decode(r.json()["b64Tgz"]))) as tar:
            names = tar.getnames()
        assert ".pedl/notebook_launcher.py" in names and ".pedl/service_launcher.py" in names
    assert {i["notebook"]["id"] for i in ids} == {t.task_id for t in tasks}


def test_the_proxy_sends_the_notebooks_token_and_notes_its_use(
    app, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock, echo: int
) -> None:
    nb = post(client, "/api/v1/notebooks", {}, user).json()["notebook"]["id"]
    (task,) = agent.start_all()
    token = task.message["env"]["JUPYTER_TOKEN"]
    assert (
        post(
            client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": echo}, bearer(task.token)
        ).status_code
        == 200
    )
    assert _last_activity(app, nb) == clock.now()  # the service answers: its idle clock starts
    advance(clock, agent, 60)
    r = client.get(f"/proxy/{nb}/api/status", headers=user)
    assert r.status_code == 200, r.text
    # the caller's own credentials stay here; the service gets the notebook's token
    assert r.json()["headers"]["authorization"] == f"token {token}"
    assert _last_activity(app, nb) == clock.now()
    used = clock.now()
    advance(clock, agent, 5)  # within the throttle: no write
    assert client.get(f"/proxy/{nb}/x", headers=user).status_code == 200
    assert _last_activity(app, nb) == used
    advance(clock, agent, 6)
    assert client.get(f"/proxy/{nb}/x", headers=user).status_code == 200
    assert _last_activity(app, nb) == clock.now()


def test_a_trials_service_gets_no_token(app, client: TestClient, user: dict, agent: FakeAgent, echo: int) -> None:
    from tests.master.fakes import SINGLE_CONFIG, create_experiment

    create_experiment(client, user, SINGLE_CONFIG)
    (task,) = agent.start_all()
    assert (
        post(
            client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": echo}, bearer(task.token)
        ).status_code
        == 200
    )
    r = client.get(f"/proxy/{task.task_id}/x", headers=user)
    assert r.status_code == 200 and "authorization" not in r.json()["headers"], r.text


def test_messages_over_the_proxys_websocket_are_use(
    app, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock, echo: int
) -> None:
    nb = post(client, "/api/v1/notebooks", {}, user).json()["notebook"]["id"]
    (task,) = agent.start_all()
    assert (
        post(
            client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": echo}, bearer(task.token)
        ).status_code
        == 200
    )
    with client.websocket_connect(f"/proxy/{nb}/ws", headers=user) as ws:
        advance(clock, agent, 30)
        ws.send_text("hello")
        assert ws.receive_text() == "hello"
        assert _last_activity(app, nb) == clock.now()
        used = clock.now()
        advance(clock, agent, 3)
        ws.send_text("again")  # within the throttle
        assert ws.receive_text() == "again"
        assert _last_activity(app, nb) == used
