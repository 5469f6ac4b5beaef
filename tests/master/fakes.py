"""Helpers for the API tests: logging in, creating experiments, and a fake agent.

A FakeAgent is attached to the master's AgentHub without a WebSocket. The controller only
schedules onto agents that have a live hub connection, so the fake owns a private (not running)
asyncio loop for its AgentConnection; messages the master sends pile up there and `messages()`
runs that loop just long enough to collect them. The agent side of the protocol (task started,
task exited) is played by calling the controller directly, as the WebSocket handler would; its answer
to check_port comes at once, from `FakeAgent.listening` (None: every port is its task's)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.common import agent_protocol as proto
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.context import MasterContext

GRID_CONFIG = """\
name: grid-exp
entrypoint: python train.py
searcher:
  name: grid
  metric: loss
  max_length: 10
hyperparameters:
  lr: {type: categorical, vals: [0.1, 0.2]}
"""

SINGLE_CONFIG = """\
name: single-exp
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
"""


def post(client: TestClient, path: str, body: Any = None, headers: dict | None = None, raw: str | None = None):
    """POST the way det does: JSON text without a Content-Type header; None sends no body."""
    content = raw if raw is not None else (None if body is None else json.dumps(body))
    return client.post(path, content=content, headers=headers or {})


def login(client: TestClient, username: str, password: str = "", *, hashed: bool = True) -> str:
    from pedl.master.identity.passwords import client_hash

    sent = client_hash(password) if hashed else password
    r = post(client, "/api/v1/auth/login", {"username": username, "password": sent, "isHashed": hashed})
    assert r.status_code == 200, r.text
    return r.json()["token"]


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def task_header(token: str) -> dict[str, str]:
    return {"Grpc-Metadata-x-allocation-token": f"Bearer {token}"}


def file_entry(path: str, data: bytes = b"", *, directory: bool = False) -> dict[str, Any]:
    return {
        "path": path,
        "type": 53 if directory else 48,
        "content": "" if directory else base64.b64encode(data).decode(),
        "mtime": "1700000000",
        "mode": 16877 if directory else 33188,
        "uid": 0,
        "gid": 0,
    }


def create_experiment(
    client: TestClient, headers: dict, config: str = GRID_CONFIG, *, files: list | None = None, activate: bool = True
) -> dict:
    body = {
        "activate": activate,
        "config": config,
        "modelDefinition": files if files is not None else [file_entry("train.py", b"print('hi')\n")],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    r = post(client, "/api/v1/experiments", body, headers)
    assert r.status_code == 200, r.text
    return r.json()["experiment"]


def ctx_of(app: FastAPI) -> MasterContext:
    return app.state.ctx


@dataclass
class StartedTask:
    allocation_id: str
    task_id: str
    trial_id: int
    token: str
    message: dict[str, Any]


@dataclass
class AnsweringConnection(AgentConnection):
    """Answers the master's check_port at once: `owns(allocation_id, port)`."""

    owns: Callable[[str, int], bool] = field(default=lambda _allocation, _port: True)
    questions: list[tuple[str, int]] = field(default_factory=list)

    def ask_port(self, allocation_id: str, port: int) -> Future[proto.PortChecked]:
        self.questions.append((allocation_id, port))
        owned = self.owns(allocation_id, port)
        answer: Future[proto.PortChecked] = Future()
        answer.set_result(
            proto.PortChecked(
                request_id="fake",
                allocation_id=allocation_id,
                port=port,
                owned=owned,
                reason="" if owned else f"nothing listens on port {port}",
            )
        )
        return answer


class FakeAgent:
    def __init__(self, app: FastAPI, agent_id: str = "agent-1", slots: int = 1, pool: str = "default") -> None:
        self.ctx = ctx_of(app)
        self.agent_id = agent_id
        self.loop = asyncio.new_event_loop()
        # the ports its tasks listen on, as (allocation id, port); None: every port is its task's
        self.listening: set[tuple[str, int]] | None = None
        self.conn = AnsweringConnection(
            agent_id=agent_id,
            master_url="http://testserver",
            remote_host="127.0.0.1",
            loop=self.loop,
            last_heartbeat=self.ctx.clock.now(),
            owns=lambda a, p: self.listening is None or (a, p) in self.listening,
        )
        self.ctx.hub.attach(self.conn)
        self.registered = self.ctx.controller.agent_registered(
            proto.Register(
                agent_id=agent_id,
                hostname="fakehost",
                address="127.0.0.1",
                resource_pool=pool,
                slots=[proto.SlotInfo(id=str(i)) for i in range(slots)],
                version="test",
            ),
            "127.0.0.1",
        )
        self.inbox: list[dict[str, Any]] = []

    def messages(self) -> list[dict[str, Any]]:
        """Everything the master sent since the last call."""
        for _ in range(3):
            self.loop.run_until_complete(asyncio.sleep(0))
        while not self.conn.queue.empty():
            self.inbox.append(self.conn.queue.get_nowait())
        out, self.inbox = self.inbox, []
        return [m for m in out if m is not None]

    def start_all(self) -> list[StartedTask]:
        """Run a scheduling pass, then report every task the master asked to start as running."""
        self.ctx.controller.tick()
        started = []
        for m in self.messages():
            if m["type"] != "start_task":
                self.inbox.append(m)
                continue
            self.ctx.controller.task_started(self.agent_id, m["allocation_id"])
            started.append(
                StartedTask(
                    m["allocation_id"], m["task_id"], int(m["env"].get("DET_TRIAL_ID", 0)), m["session_token"], m
                )
            )
        return started

    def exit(self, allocation_id: str, exit_code: int | None = 0, reason: str = "", *, contacted: bool = True) -> None:
        """The task ends; unless `contacted` is False it called the master first, as every real trial
        does (one that never did ran off-cluster: lifecycle/task_contact.py)."""
        if contacted:
            self.ctx.task_contact.note(self.ctx.db, allocation_id, self.ctx.clock.now())
        self.ctx.controller.task_exited(self.agent_id, allocation_id, exit_code, reason)

    def close(self) -> None:
        self.ctx.hub.detach(self.conn)
        self.loop.close()
