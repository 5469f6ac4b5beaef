"""The agent WebSocket and the agent listing: token checks, registration, and a task run end to
end over the socket (start_task out; task_started, task_logs, task_exited back)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError
from starlette.websockets import WebSocketDisconnect

from pedl.clock import ManualClock
from pedl.common import agent_protocol as proto
from pedl.config.master_config import MasterConfig
from pedl.master.agents import credentials as agent_credentials
from pedl.master.agents import service as agents_service
from pedl.master.api import agents as agents_api
from pedl.master.app import create_app
from pedl.version import DETERMINED_API_VERSION, __version__
from tests.master.fakes import SINGLE_CONFIG, bearer, create_experiment, login

TOKEN = "s3cret-agent-token"


def eventually(check: Callable[[], bool], limit_s: float = 60.0) -> bool:
    """Poll until `check` holds; the limit only stops a hung test, it is not a speed requirement."""
    deadline = time.monotonic() + limit_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.fixture
def token_client(master_config: MasterConfig, clock: ManualClock) -> Iterator[TestClient]:
    # the TestClient's peer is "testclient", not loopback, so agents need the shared token
    with TestClient(create_app(master_config.model_copy(update={"agent_token": TOKEN}), clock=clock)) as c:
        yield c


def register(agent_id: str = "ws-agent", slots: int = 1, pool: str = "default", version: str = __version__) -> dict:
    return proto.dump(
        proto.Register(
            agent_id=agent_id,
            hostname="host-1",
            address="10.0.0.5",
            resource_pool=pool,
            slots=[proto.SlotInfo(id=str(i)) for i in range(slots)],
            version=version,
        )
    )


@pytest.mark.parametrize("headers", [{}, {"X-Pedl-Agent-Token": "wrong"}])
def test_wrong_or_missing_agent_token_is_refused(token_client: TestClient, headers: dict) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as info,
        token_client.websocket_connect("/agents/ws", headers=headers) as ws,
    ):
        ws.receive_json()
    assert info.value.code == proto.CLOSE_UNAUTHORIZED


def test_without_a_configured_token_a_tokenless_agent_is_refused(client: TestClient) -> None:
    with pytest.raises(WebSocketDisconnect) as info, client.websocket_connect("/agents/ws") as ws:
        ws.receive_json()
    assert info.value.code == proto.CLOSE_UNAUTHORIZED


@pytest.mark.parametrize("first", [{"type": "heartbeat"}, {"type": "register"}, {"hello": 1}])
def test_first_message_must_be_a_register(token_client: TestClient, first: dict) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as info,
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws,
    ):
        ws.send_json(first)
        ws.receive_json()
    assert info.value.code == proto.CLOSE_BAD_REQUEST


def test_unknown_pool_is_refused(token_client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as info,
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws,
    ):
        ws.send_json(register(pool="nope"))
        ws.receive_json()
    assert info.value.code == proto.CLOSE_BAD_REQUEST


def test_register_and_list(token_client: TestClient, master_config: MasterConfig) -> None:
    h = bearer(login(token_client, "determined"))
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register(slots=2))
        reply = proto.MASTER_MESSAGE.validate_python(ws.receive_json())
        assert isinstance(reply, proto.Registered)
        assert reply.agent_id == "ws-agent"
        assert reply.heartbeat_interval == master_config.agent_heartbeat_interval
        assert reply.kill_unknown == []
        [agent] = token_client.get("/api/v1/agents", headers=h).json()["agents"]
        assert agent["id"] == "ws-agent"
        assert agent["connected"] is True and agent["state"] == "CONNECTED"
        assert (agent["version"], agent["pedlVersion"]) == (DETERMINED_API_VERSION, __version__)
        assert agent["addresses"] == ["10.0.0.5"]
        assert agent["resourcePools"] == ["default"]
        assert sorted(agent["slots"]) == ["0", "1"]
        assert agent["slotStats"]["typeStats"]["TYPE_CPU"]["total"] == 2
    [agent] = token_client.get("/api/v1/agents", headers=h).json()["agents"]
    assert agent["connected"] is False
    assert eventually(
        lambda: token_client.get("/api/v1/agents", headers=h).json()["agents"][0]["state"] == "DISCONNECTED"
    )


def test_listed_slots_carry_each_gpus_memory_beside_determineds_device_fields(token_client: TestClient) -> None:
    h = bearer(login(token_client, "determined"))
    gpus = [
        proto.SlotInfo(id="0", type="cuda", brand="NVIDIA H100 80GB HBM3", uuid="GPU-a", memory_mib=81559),
        proto.SlotInfo(id="1", type="cuda", brand="GRID T4-8Q", uuid="GPU-b"),
    ]  # NVML told no memory size
    msg = proto.dump(
        proto.Register(
            agent_id="gpu-agent",
            hostname="host-1",
            address="10.0.0.5",
            resource_pool="default",
            slots=gpus,
            version=__version__,
        )
    )
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(msg)
        assert ws.receive_json()["type"] == "registered"
        [agent] = token_client.get("/api/v1/agents", headers=h).json()["agents"]
    assert agent["slots"]["0"]["device"] == {
        "id": 0,
        "type": "TYPE_CUDA",
        "brand": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-a",
        "memoryMib": 81559,
    }
    assert agent["slots"]["1"]["device"] == {"id": 1, "type": "TYPE_CUDA", "brand": "GRID T4-8Q", "uuid": "GPU-b"}
    assert agent["slotStats"]["typeStats"]["TYPE_CUDA"]["total"] == 2


def test_cpu_slots_carry_no_memory(token_client: TestClient) -> None:
    h = bearer(login(token_client, "determined"))
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register(slots=1))
        ws.receive_json()
        [agent] = token_client.get("/api/v1/agents", headers=h).json()["agents"]
    assert agent["slots"]["0"]["device"] == {"id": 0, "type": "TYPE_CPU", "brand": "CPU", "uuid": ""}


def test_unknown_running_allocations_are_killed_on_register(token_client: TestClient) -> None:
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        msg = register()
        msg["running_allocations"] = ["ghost.1.1"]
        ws.send_json(msg)
        reply = ws.receive_json()
        assert reply["type"] == "registered" and reply["kill_unknown"] == ["ghost.1.1"]


def test_a_task_runs_over_the_socket(token_client: TestClient) -> None:
    h = bearer(login(token_client, "determined"))
    exp = create_experiment(token_client, h, SINGLE_CONFIG)
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["type"] == "registered"
        start = proto.MASTER_MESSAGE.validate_python(ws.receive_json())  # scheduling is woken by the register
        assert isinstance(start, proto.StartTask)
        assert start.slot_ids == ["0"]
        assert start.context_url.endswith(f"/api/v1/tasks/{start.task_id}/context_directory")
        trial_id = int(start.env["DET_TRIAL_ID"])

        ws.send_json(proto.dump(proto.TaskStarted(allocation_id=start.allocation_id, pid=4242)))
        ws.send_json(
            proto.dump(
                proto.TaskLogs(
                    allocation_id=start.allocation_id,
                    lines=[
                        proto.LogLine(timestamp=1.0, stdtype="stdout", message="hello from the task"),
                        proto.LogLine(timestamp=2.0, stdtype="stderr", message="a warning\n"),
                    ],
                )
            )
        )
        # reports made with the session token the start message carried
        body = {
            "group": "validation",
            "metrics": {
                "trialId": trial_id,
                "trialRunId": 1,
                "stepsCompleted": 10,
                "metrics": {"avgMetrics": {"loss": 0.5}},
            },
        }
        r = token_client.post(
            f"/api/v1/trials/{trial_id}/metrics",
            content=json.dumps(body),
            headers={"Grpc-Metadata-x-allocation-token": f"Bearer {start.session_token}"},
        )
        assert r.status_code == 200
        ws.send_json(proto.dump(proto.TaskExited(allocation_id=start.allocation_id, exit_code=0)))
        # the master answers nothing to task_exited, so watch for its effect; leaving this block
        # would cancel the socket's handler before it read the message
        assert eventually(
            lambda: (
                token_client.get(f"/api/v1/experiments/{exp['id']}", headers=h).json()["experiment"]["state"]
                == "STATE_COMPLETED"
            )
        )
    text = token_client.get(f"/api/v1/trials/{trial_id}/logs?follow=false", headers=h).text
    messages = [json.loads(line)["result"]["message"] for line in text.splitlines()]
    assert messages == ["hello from the task\n", "a warning\n"]


def test_registered_is_always_the_first_message(token_client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Work scheduled while the master handles the register (here: forced, in the same call) must
    not overtake the `registered` answer on the socket."""
    h = bearer(login(token_client, "determined"))
    create_experiment(token_client, h, SINGLE_CONFIG)
    ctl = token_client.app.state.ctx.controller  # type: ignore[attr-defined]
    original = agent_credentials.register

    def register_then_schedule(*args: Any, **kwargs: Any) -> tuple[proto.Registered, Any]:
        reply = original(*args, **kwargs)
        ctl.tick()  # queues start_task for the new agent before `registered` is sent
        return reply

    monkeypatch.setattr(agent_credentials, "register", register_then_schedule)
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["type"] == "registered"
        assert ws.receive_json()["type"] == "start_task"


# -- agents are authenticated by default ---------------------------------------

LOOPBACK_PEER = ("127.0.0.1", 50000)


def _attach(client: TestClient, headers: dict | None = None) -> dict:
    """Connect as an agent and register; the master's first answer, or the close code it sent."""
    try:
        with client.websocket_connect("/agents/ws", headers=headers or {}) as ws:
            ws.send_json(register(agent_id="intruder"))
            return ws.receive_json()
    except WebSocketDisconnect as exc:
        return {"closed": exc.code}


def test_a_loopback_agent_without_the_token_is_refused_by_default(app) -> None:
    """Before, any process on the master's host registered without a token and was handed queued
    tasks, with their session tokens and code."""
    with TestClient(app, client=LOOPBACK_PEER) as c:
        h = bearer(login(c, "determined"))
        create_experiment(c, h, SINGLE_CONFIG)
        assert _attach(c) == {"closed": proto.CLOSE_UNAUTHORIZED}
        assert _attach(c, {"X-Pedl-Agent-Token": "guess"}) == {"closed": proto.CLOSE_UNAUTHORIZED}
        assert c.get("/api/v1/agents", headers=h).json()["agents"] == []


def test_the_generated_token_admits_an_agent(app) -> None:
    ctx = app.state.ctx
    stored = (ctx.config.data_dir / "agent_token").read_text().strip()
    assert ctx.agent_token == stored and len(stored) >= 32
    with TestClient(app) as c:  # a remote peer ("testclient")
        assert _attach(c, {"X-Pedl-Agent-Token": stored})["type"] == "registered"


def test_the_loopback_opt_in_admits_tokenless_loopback_agents_only(
    master_config: MasterConfig, clock: ManualClock
) -> None:
    security = master_config.security.model_copy(update={"allow_unauthenticated_loopback_agents": True})
    config = master_config.model_copy(update={"security": security})
    with TestClient(create_app(config, clock=clock), client=LOOPBACK_PEER) as c:
        assert _attach(c)["type"] == "registered"
        # a token, when offered, must still be the right one
        assert _attach(c, {"X-Pedl-Agent-Token": "wrong"}) == {"closed": proto.CLOSE_UNAUTHORIZED}
    with TestClient(create_app(config, clock=clock)) as c:  # not loopback: the opt-in does not apply
        assert _attach(c) == {"closed": proto.CLOSE_UNAUTHORIZED}


def test_a_rogue_with_the_agent_token_cannot_take_a_connected_agents_id(token_client: TestClient) -> None:
    """Before, the master accepted the impostor and closed the real agent with 4409, then sent the impostor
    the real agent's tasks; now the impostor is refused (4401, saying why) and the real agent keeps its
    connection and its work."""
    h = bearer(login(token_client, "determined"))
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as real:
        real.send_json(register())
        reply = real.receive_json()
        assert reply["type"] == "registered" and reply["credential"]
        with (
            pytest.raises(WebSocketDisconnect) as info,
            token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as rogue,
        ):
            rogue.send_json(register())
            rogue.receive_json()
        assert (info.value.code, info.value.reason) == (proto.CLOSE_UNAUTHORIZED, agent_credentials.HAS_CREDENTIAL)
        # the real agent is still connected, and is the one given the next task
        create_experiment(token_client, h, SINGLE_CONFIG)
        assert real.receive_json()["type"] == "start_task"


def test_an_agent_comes_back_with_its_credential_alone(token_client: TestClient) -> None:
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        credential = ws.receive_json()["credential"]
    assert _attach(token_client, {proto.CREDENTIAL_HEADER: credential}) == {"closed": proto.CLOSE_UNAUTHORIZED}
    with token_client.websocket_connect("/agents/ws", headers={proto.CREDENTIAL_HEADER: credential}) as ws:
        ws.send_json(register())
        reply = ws.receive_json()
        assert reply["type"] == "registered" and reply["credential"] is None  # it has one already
    with (
        pytest.raises(WebSocketDisconnect) as info,
        token_client.websocket_connect("/agents/ws", headers={proto.CREDENTIAL_HEADER: "guess"}) as ws,
    ):
        ws.send_json(register())
        ws.receive_json()
    assert (info.value.code, info.value.reason) == (proto.CLOSE_UNAUTHORIZED, agent_credentials.WRONG_CREDENTIAL)


def test_an_admin_forgets_a_lost_credential(token_client: TestClient) -> None:
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["credential"]
    user, admin = bearer(login(token_client, "determined")), bearer(login(token_client, "admin"))
    assert token_client.post("/api/v1/agents/ws-agent/forget", headers=user).status_code == 403
    assert token_client.post("/api/v1/agents/nobody/forget", headers=admin).status_code == 404
    with (
        pytest.raises(WebSocketDisconnect),
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws,
    ):
        ws.send_json(register())
        ws.receive_json()
    assert token_client.post("/api/v1/agents/ws-agent/forget", headers=admin).status_code == 200
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["credential"]


def test_an_agent_is_sent_only_the_tasks_placed_on_it(
    token_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second agent registered with the agent token (a rogue, say) gets nothing the scheduler did not
    place on it: every start_task, with its session token and environment, goes to its placement's agents."""
    ctx = token_client.app.state.ctx  # type: ignore[attr-defined]
    sent: list[tuple[str, proto.StartTask]] = []
    real_send = ctx.hub.send

    def recording(agent_id: str, msg: Any) -> bool:
        if isinstance(msg, proto.StartTask):
            sent.append((agent_id, msg))
        return real_send(agent_id, msg)

    monkeypatch.setattr(ctx.hub, "send", recording)
    h, admin = bearer(login(token_client, "determined")), bearer(login(token_client, "admin"))
    with (
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as real,
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as rogue,
    ):
        real.send_json(register("real", slots=1))
        assert real.receive_json()["type"] == "registered"
        rogue.send_json(register("rogue", slots=4))
        assert rogue.receive_json()["type"] == "registered"
        assert token_client.post("/api/v1/agents/rogue/disable", headers=admin).status_code == 200
        exp = create_experiment(token_client, h, SINGLE_CONFIG)
        start = proto.MASTER_MESSAGE.validate_python(real.receive_json())
        assert isinstance(start, proto.StartTask)
        allocs = token_client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=h).json()["trials"]
        assert len(allocs) == 1
    assert [(agent_id, m.allocation_id) for agent_id, m in sent] == [("real", start.allocation_id)]


def test_registered_tells_the_agent_how_long_it_may_stay_cut_off(
    token_client: TestClient, master_config: MasterConfig
) -> None:
    reply = _attach(token_client, {"X-Pedl-Agent-Token": TOKEN})
    assert reply["type"] == "registered"
    assert reply["reconnect_wait"] == master_config.agent_reconnect_wait
    assert reply["kill_grace_period"] == master_config.task_kill_grace_period


def test_an_agent_of_another_version_is_refused_naming_both(token_client: TestClient) -> None:
    with (
        pytest.raises(WebSocketDisconnect) as info,
        token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws,
    ):
        ws.send_json(register("old-agent", version="0.0.9"))
        ws.receive_json()
    assert info.value.code == proto.CLOSE_VERSION_MISMATCH
    assert info.value.reason == f"agent pedl 0.0.9, master pedl {__version__}"
    agents = token_client.get("/api/v1/agents", headers=bearer(login(token_client, "admin"))).json()["agents"]
    assert "old-agent" not in [a["id"] for a in agents]  # nothing registered


# -- a database outage must not lose what agents send (PostgreSQL restart under a running trial) ---


def _database_down_once(original: Callable) -> tuple[Callable, list[str]]:
    """`original`, except that its first call fails as a lost PostgreSQL connection does."""
    calls: list[str] = []

    def flaky(*args: object) -> object:
        calls.append("try")
        if len(calls) == 1:
            raise OperationalError("INSERT ...", {}, Exception("server closed the connection unexpectedly"))
        return original(*args)

    return flaky, calls


@pytest.mark.parametrize("failing", ["store_logs", "task_exited"])
def test_a_message_the_database_could_not_take_is_retried_on_the_same_connection(
    token_client: TestClient, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """Before, the socket's catch-all dropped the agent's connection; the agent had already
    removed the message from its outbox, so the log lines (or the exit code) were lost."""
    monkeypatch.setattr(agents_api, "DB_RETRY_FIRST_S", 0.0)
    h = bearer(login(token_client, "determined"))
    exp = create_experiment(token_client, h, SINGLE_CONFIG)
    ctl = token_client.app.state.ctx.controller  # type: ignore[attr-defined]
    if failing == "store_logs":
        flaky, calls = _database_down_once(agents_service.store_logs)
        monkeypatch.setattr(agents_service, "store_logs", flaky)
    else:
        flaky, calls = _database_down_once(ctl.task_exited)
        monkeypatch.setattr(ctl, "task_exited", flaky)
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["type"] == "registered"
        start = proto.MASTER_MESSAGE.validate_python(ws.receive_json())
        assert isinstance(start, proto.StartTask)
        trial_id = int(start.env["DET_TRIAL_ID"])
        ws.send_json(proto.dump(proto.TaskStarted(allocation_id=start.allocation_id, pid=4242)))
        ws.send_json(
            proto.dump(
                proto.TaskLogs(
                    allocation_id=start.allocation_id,
                    lines=[proto.LogLine(timestamp=1.0, stdtype="stdout", message="said during the outage")],
                )
            )
        )
        body = {
            "group": "validation",
            "metrics": {
                "trialId": trial_id,
                "trialRunId": 1,
                "stepsCompleted": 10,
                "metrics": {"avgMetrics": {"loss": 0.5}},
            },
        }
        r = token_client.post(
            f"/api/v1/trials/{trial_id}/metrics",
            content=json.dumps(body),
            headers={"Grpc-Metadata-x-allocation-token": f"Bearer {start.session_token}"},
        )
        assert r.status_code == 200
        ws.send_json(proto.dump(proto.TaskExited(allocation_id=start.allocation_id, exit_code=0)))
        assert eventually(
            lambda: (
                token_client.get(f"/api/v1/experiments/{exp['id']}", headers=h).json()["experiment"]["state"]
                == "STATE_COMPLETED"
            )
        )
        # the exit code arrived (0: completed, not "no longer running") and the agent stayed connected
        [agent] = token_client.get("/api/v1/agents", headers=h).json()["agents"]
        assert agent["connected"] is True and agent["state"] == "CONNECTED"
    assert calls == ["try", "try"]
    text = token_client.get(f"/api/v1/trials/{trial_id}/logs?follow=false", headers=h).text
    messages = [json.loads(line)["result"]["message"] for line in text.splitlines()]
    assert messages == ["said during the outage\n"]  # stored once


def test_a_large_agent_message_is_parsed_off_the_event_loop(
    token_client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of task logs may be megabytes: it is parsed in a worker thread (on the loop it would hold up every
    request and every other agent's heartbeat); a register- or heartbeat-sized message is parsed in place."""
    real = agents_api.run_in_threadpool
    parsed_off_loop: list[int] = []  # the size of each agent message handed to the thread pool

    async def spy(fn: Callable[..., Any], *args: Any) -> Any:
        if fn == proto.AGENT_MESSAGE.validate_json:
            parsed_off_loop.append(len(args[0]))
        return await real(fn, *args)

    monkeypatch.setattr(agents_api, "run_in_threadpool", spy)
    h = bearer(login(token_client, "determined"))
    exp = create_experiment(token_client, h, SINGLE_CONFIG)
    with token_client.websocket_connect("/agents/ws", headers={"X-Pedl-Agent-Token": TOKEN}) as ws:
        ws.send_json(register())
        assert ws.receive_json()["type"] == "registered"
        start = proto.MASTER_MESSAGE.validate_python(ws.receive_json())
        assert isinstance(start, proto.StartTask)
        lines = [proto.LogLine(timestamp=float(i), stdtype="stdout", message="x" * 1000) for i in range(400)]
        ws.send_json(proto.dump(proto.TaskLogs(allocation_id=start.allocation_id, lines=lines)))
        ws.send_json(proto.dump(proto.TaskExited(allocation_id=start.allocation_id, exit_code=0)))
        # the master answers nothing to task_exited: watch for its effect (it follows the logs on the socket)
        assert eventually(
            lambda: (
                token_client.get(f"/api/v1/experiments/{exp['id']}", headers=h).json()["experiment"]["state"]
                != "STATE_ACTIVE"
            )
        )
    text = token_client.get(f"/api/v1/trials/{start.env['DET_TRIAL_ID']}/logs?follow=false", headers=h).text
    assert sum("x" * 1000 in line for line in text.splitlines()) == 400
    assert len(parsed_off_loop) == 1 and parsed_off_loop[0] > 400_000  # the logs alone
