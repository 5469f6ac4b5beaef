"""Fixtures for the agent tests: a model-definition HTTP server and a fake master WebSocket.

Both are real servers on 127.0.0.1 with an ephemeral port; nothing of the agent is mocked.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import ssl
import tarfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from pydantic import BaseModel
from websockets.asyncio.server import Server, ServerConnection, serve

from pedl.agent import Agent, AgentOptions
from pedl.common.agent_protocol import Registered
from tests.support.quiet_http import QuietHTTPServer


def make_tgz(files: dict[str, str]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


class ContextServer:
    """Serves `{"b64Tgz": ...}` at /contexts/<name> to requests bearing the right token."""

    def __init__(self) -> None:
        self.bodies: dict[str, tuple[str, bytes]] = {}  # path -> (token, raw JSON body)
        self.requests: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # http.server's naming
                server.requests.append({"path": self.path, **dict(self.headers)})
                entry = server.bodies.get(self.path)
                if entry is None:
                    return self._answer(404, b'{"error": "not found"}')
                token, body = entry
                if self.headers.get("Authorization") != f"Bearer {token}":
                    return self._answer(401, b'{"error": "unauthenticated"}')
                self._answer(200, body)

            def _answer(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self._httpd = QuietHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    def add(self, name: str, files: dict[str, str], token: str = "tok") -> str:
        return self.add_raw(name, json.dumps({"b64Tgz": base64.b64encode(make_tgz(files)).decode()}).encode(), token)

    def add_raw(self, name: str, body: bytes, token: str = "tok") -> str:
        self.bodies[f"/contexts/{name}"] = (token, body)
        return f"{self.base_url}/contexts/{name}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def context_server() -> Iterator[ContextServer]:
    server = ContextServer()
    yield server
    server.close()


class FakeMaster:
    """A WebSocket server speaking the master's side of `/agents/ws`, recording what it gets."""

    def __init__(self, heartbeat_interval: float = 0.2, ssl_context: ssl.SSLContext | None = None) -> None:
        self.heartbeat_interval = heartbeat_interval
        self.ssl_context = ssl_context  # serve wss:// with this certificate
        self.kill_unknown: list[str] = []
        self.reconnect_wait: float | None = None  # None: as a master from before fencing
        self.kill_grace_period: float | None = None
        self.refuse_code: int | None = None  # close every connection with this code at once
        self.refuse_reason = "unauthorized"
        self.credential: str | None = None  # issued in the next `registered` (then cleared), as a master does once
        self.sessions: list[list[dict[str, Any]]] = []  # messages, one list per connection
        self.paths: list[str] = []
        self.headers: list[dict[str, str]] = []
        self.port = 0
        self._server: Server | None = None
        self._current: ServerConnection | None = None

    @property
    def url(self) -> str:
        return f"{'https' if self.ssl_context else 'http'}://127.0.0.1:{self.port}"

    async def start(self) -> None:
        self._server = await serve(self._handler, "127.0.0.1", self.port, ssl=self.ssl_context)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Drop every connection and stop listening (a master going away)."""
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        self._server = None
        self._current = None

    async def send(self, msg: BaseModel) -> None:
        assert self._current is not None, "no agent connected"
        await self._current.send(msg.model_dump_json())

    def messages(self, type_: str | None = None, session: int | None = None) -> list[dict[str, Any]]:
        sessions = self.sessions if session is None else self.sessions[session : session + 1]
        return [m for s in sessions for m in s if type_ is None or m["type"] == type_]

    def log_lines(self, allocation_id: str, session: int | None = None) -> list[dict[str, Any]]:
        return [
            line
            for m in self.messages("task_logs", session)
            if m["allocation_id"] == allocation_id
            for line in m["lines"]
        ]

    async def _handler(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.paths.append(ws.request.path)
        self.headers.append({k.lower(): v for k, v in ws.request.headers.raw_items()})
        if self.refuse_code is not None:
            await ws.close(self.refuse_code, self.refuse_reason)
            return
        received: list[dict[str, Any]] = []
        self.sessions.append(received)
        self._current = ws
        async for raw in ws:
            msg = json.loads(raw)
            received.append(msg)
            if msg["type"] == "register":
                await ws.send(
                    Registered(
                        agent_id=msg["agent_id"],
                        heartbeat_interval=self.heartbeat_interval,
                        kill_unknown=self.kill_unknown,
                        reconnect_wait=self.reconnect_wait,
                        kill_grace_period=self.kill_grace_period,
                        credential=self.credential,
                    ).model_dump_json()
                )
                self.credential = None


@pytest.fixture
async def fake_master() -> AsyncIterator[FakeMaster]:
    master = FakeMaster()
    await master.start()
    yield master
    if master._server is not None:
        await master.stop()


@asynccontextmanager
async def running_agent(options: AgentOptions, **kwargs: Any) -> AsyncIterator[Agent]:
    """An Agent running in this event loop; stopped (tasks killed) on exit."""
    agent = Agent(options, **kwargs)
    stop = asyncio.Event()
    run = asyncio.create_task(agent.run(stop))
    try:
        yield agent
    finally:
        stop.set()
        await asyncio.wait_for(run, 60)


async def eventually(condition: Callable[[], Any], timeout: float = 20.0, what: str = "condition") -> Any:
    """Poll `condition` until it returns something truthy; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
