"""A shell's tunnel through the master's proxy, served for real (uvicorn) with a fake agent: a
WebSocket to /proxy/{task_id}/ bridged to a TCP echo service on a loopback port standing in for
sshd. Bytes both ways, who passes (a tunnel without credentials does, to a shell only), plain HTTP
refused, and the tunnel closed when the task ends."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from pedl.config.master_config import MasterConfig
from pedl.master.api.proxy_tcp import CHUNK, payload
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import FakeAgent, bearer, login, post
from tests.support.live_master import LiveMaster


def test_a_message_is_written_as_its_bytes_and_a_disconnect_ends_the_stream() -> None:
    assert payload({"type": "websocket.receive", "bytes": b"\x00\xffssh"}) == b"\x00\xffssh"
    assert payload({"type": "websocket.receive", "text": "é"}) == "é".encode()
    assert payload({"type": "websocket.receive", "bytes": None, "text": None}) == b""
    assert payload({"type": "websocket.disconnect", "code": 1000}) is None


class EchoServer:
    """A TCP service that sends back what it gets, counting the bytes (sshd's stand-in)."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    @staticmethod
    def _echo(conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(65536):
                conn.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)  # close alone leaves it listening while accept() blocks
        self.sock.close()


@pytest.fixture
def world(master_config: MasterConfig) -> Iterator[SimpleNamespace]:
    config = master_config.model_copy(
        update={"proxy": master_config.proxy.model_copy(update={"max_relays_per_task": 2, "end_check_interval": 0.1})}
    )
    echo = EchoServer()
    with LiveMaster(config) as master, httpx.Client(base_url=master.url, timeout=60) as client:
        app = master.server.config.app
        admin = bearer(login(client, "admin"))
        for name in ("alice", "bob"):
            body = {
                "user": {"username": name, "admin": False, "active": True},
                "password": client_hash("pw"),
                "isHashed": True,
            }
            assert post(client, "/api/v1/users", body, admin).status_code == 200
        alice, bob = (bearer(login(client, name, "pw")) for name in ("alice", "bob"))
        agent = FakeAgent(app, "agent-1", slots=2)
        shell = post(client, "/api/v1/shells", {}, alice).json()["shell"]
        notebook = post(client, "/api/v1/notebooks", {}, alice).json()["notebook"]
        tasks = {t.task_id: t for t in agent.start_all()}
        for task in tasks.values():
            r = post(
                client, f"/api/v1/allocations/{task.allocation_id}/proxy_port", {"port": echo.port}, bearer(task.token)
            )
            assert r.status_code == 200, r.text
        yield SimpleNamespace(
            master=master,
            client=client,
            alice=alice,
            bob=bob,
            admin=admin,
            agent=agent,
            echo=echo,
            shell=tasks[shell["id"]],
            notebook=tasks[notebook["id"]],
            ws=master.url.replace("http://", "ws://") + f"/proxy/{shell['id']}/",
        )
        agent.close()
    echo.close()


async def _status(url: str, headers: dict | None = None) -> int:
    try:
        async with connect(url, additional_headers=headers or {}):
            return 101
    except InvalidStatus as exc:
        return exc.response.status_code


def test_bytes_go_both_ways_in_binary_messages_without_credentials(world) -> None:
    data = bytes(range(256)) * 4096 * 3  # 3 MiB: many reads of the stream

    async def run() -> tuple[bytes, int]:
        got = bytearray()
        async with connect(world.ws, max_size=None) as ws:

            async def send() -> None:
                for i in range(0, len(data), 100_000):
                    await ws.send(data[i : i + 100_000])

            sender = asyncio.ensure_future(send())
            biggest = 0
            while len(got) < len(data):
                message = await ws.recv()
                assert isinstance(message, bytes)
                biggest = max(biggest, len(message))
                got += message
            await sender
        return bytes(got), biggest

    got, biggest = asyncio.run(run())
    assert hashlib.sha256(got).digest() == hashlib.sha256(data).digest()
    assert biggest <= CHUNK


def test_who_passes_the_tunnel(world) -> None:
    ws = world.ws
    assert asyncio.run(_status(ws, world.alice)) == 101
    assert asyncio.run(_status(ws, world.admin)) == 101
    assert asyncio.run(_status(ws, world.bob)) == 404  # the answer of an unknown task
    assert asyncio.run(_status(ws, bearer(world.shell.token))) == 403  # a task token never passes
    assert asyncio.run(_status(ws, bearer("garbage"))) == 401  # credentials sent are checked
    # without credentials only a shell's tunnel passes: a notebook's socket, or no task at all, is 401
    notebook = ws.replace(world.shell.task_id, world.notebook.task_id)
    assert asyncio.run(_status(notebook)) == 401
    assert asyncio.run(_status(ws.replace(world.shell.task_id, "no-such-task"))) == 401


def test_plain_http_to_a_shell_says_how_it_is_reached(world) -> None:
    url = f"/proxy/{world.shell.task_id}/"
    r = world.client.get(url, headers=world.alice)
    assert r.status_code == 400 and "WebSocket tunnel" in r.json()["message"]
    assert world.client.get(url).status_code == 401
    assert world.client.get(url, headers=world.bob).status_code == 404


def test_the_relay_bound_holds_for_tunnels(world) -> None:
    async def run() -> int:
        async with connect(world.ws), connect(world.ws):  # proxy.max_relays_per_task is 2 here
            return await _status(world.ws)

    assert asyncio.run(run()) == 429


def test_a_tunnel_closes_when_its_task_ends_and_the_service_is_not_reached_after(world) -> None:
    async def run() -> int | None:
        async with connect(world.ws) as ws:
            await ws.send(b"ping")
            assert await ws.recv() == b"ping"
            await asyncio.to_thread(world.agent.exit, world.shell.allocation_id, 0)
            try:
                await asyncio.wait_for(ws.recv(), 30)
            except ConnectionClosed:
                return ws.close_code
        return None

    assert asyncio.run(run()) == 1001
    assert asyncio.run(_status(world.ws)) == 404  # it has ended


def test_an_unreachable_sshd_is_502_before_the_handshake(world) -> None:
    world.echo.close()
    assert asyncio.run(_status(world.ws, world.alice)) == 502
