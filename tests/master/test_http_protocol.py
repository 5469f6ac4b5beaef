"""The master's HTTP protocol on a real socket: a request whose headers or body stall is cut off with a
408, headers past the bound get a 431, and connections past the caps get a 429 (per address) or a
503 (in total), while a WebSocket leaves its address's count."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import uvicorn

from pedl.config.server_config import ServerConfig
from pedl.devcluster import wait_for
from pedl.master.http_protocol import BODY_TIMED_OUT, ConnectionCaps, MasterHttpProtocol, RareLog

SHORT = 0.3  # seconds: the timeouts under test, short so that the tests are quick


@dataclass
class Seen:
    """What the app saw: each request's body, or the disconnect that ended its reading."""

    bodies: list[bytes] = field(default_factory=list)
    disconnects: list[dict] = field(default_factory=list)
    go: threading.Event = field(default_factory=threading.Event)  # the /later route reads only once set


def make_app(seen: Seen):  # an ASGI app
    async def app(scope: dict, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] == "websocket":
            await receive()
            await send({"type": "websocket.accept"})
            while (await receive())["type"] != "websocket.disconnect":
                pass
            return
        if scope["path"] == "/early":  # refused unread, as an over-limit body is
            await send({"type": "http.response.start", "status": 413, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        if scope["path"] == "/later":
            while not seen.go.is_set():
                await asyncio.sleep(0.05)
        body = b""
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                seen.disconnects.append({"timed_out": scope.get(BODY_TIMED_OUT)})
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        seen.bodies.append(body)
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    return app


@dataclass
class Running:
    port: int
    seen: Seen
    caps: ConnectionCaps

    def connect(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        return sock


@contextlib.contextmanager
def serve(settings: ServerConfig, caps: ConnectionCaps) -> Iterator[Running]:
    seen = Seen()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        make_app(seen),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http=MasterHttpProtocol.bound(settings, caps),
        proxy_headers=False,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        wait_for(lambda: server.started, 30, what="the test server")
        yield Running(port, seen, caps)
    finally:
        seen.go.set()
        server.should_exit = True
        thread.join(timeout=30)


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    out = b""
    with contextlib.suppress(ConnectionResetError):
        while chunk := sock.recv(65536):
            out += chunk
    return out


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0


SETTINGS = ServerConfig(header_read_timeout=SHORT, body_read_timeout=SHORT, max_header_bytes=4096)


@pytest.fixture
def server() -> Iterator[Running]:
    with serve(SETTINGS, ConnectionCaps(total=100, per_address=100, trusted_proxies=[])) as running:
        yield running


def test_half_sent_headers_are_cut_off_with_a_408(server: Running) -> None:
    with server.connect() as silent, server.connect() as half:
        half.sendall(b"POST /x HTTP/1.1\r\nHost: master\r\nContent-Len")
        for sock in (silent, half):
            raw = answer(sock)
            assert status_of(raw) == 408 and b"server.header_read_timeout" in raw
    assert server.seen.bodies == [] and server.seen.disconnects == []


def test_a_body_that_stalls_is_cut_off_and_the_app_told_why(server: Running) -> None:
    with server.connect() as sock:
        sock.sendall(b"POST /x HTTP/1.1\r\nHost: master\r\nContent-Length: 100\r\n\r\n0123456789")
        raw = answer(sock)
    assert status_of(raw) == 408 and b"server.body_read_timeout" in raw
    # the app hears of the disconnect on its own task, which may run after the 408 reached the client
    wait_for(lambda: server.seen.disconnects, 10, what="the app told of the disconnect")
    assert server.seen.disconnects == [{"timed_out": SHORT}]


def test_a_whole_request_on_a_connection_kept_alive_is_answered(server: Running) -> None:
    with server.connect() as sock:
        for _ in range(2):
            sock.sendall(b"POST /x HTTP/1.1\r\nHost: master\r\nContent-Length: 5\r\n\r\nhello")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    assert server.seen.bodies == [b"hello", b"hello"]


def test_a_pause_while_the_master_is_not_reading_is_not_the_clients(server: Running) -> None:
    """The app takes its body only later, after several body timeouts: the client had sent all of it and
    waited on the master (reading paused), so the request is answered, not cut off."""
    body = b"x" * (512 * 1024)
    with server.connect() as sock:
        sender = threading.Thread(
            target=sock.sendall,
            args=(b"POST /later HTTP/1.1\r\nHost: master\r\nContent-Length: %d\r\n\r\n" % len(body) + body,),
        )
        sender.start()
        threading.Event().wait(4 * SHORT)
        server.seen.go.set()
        sender.join(timeout=30)
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    assert server.seen.bodies == [body]


def test_headers_past_the_bound_get_a_431(server: Running) -> None:
    with server.connect() as sock:
        sock.sendall(b"GET /x HTTP/1.1\r\nHost: master\r\n" + b"X-Filler: " + b"a" * 8000)
        raw = answer(sock)
    assert status_of(raw) == 431 and b"server.max_header_bytes" in raw


def test_connections_past_the_per_address_cap_get_a_429() -> None:
    settings = ServerConfig(header_read_timeout=60, body_read_timeout=60)
    with serve(settings, ConnectionCaps(total=100, per_address=2, trusted_proxies=[])) as server:
        first, second = server.connect(), server.connect()
        wait_for(lambda: server.caps.open_from("127.0.0.1") == 2, 30, what="two connections counted")
        with server.connect() as third:
            raw = answer(third)
        assert status_of(raw) == 429 and b"server.max_connections_per_address" in raw
        first.close()
        wait_for(lambda: server.caps.open_from("127.0.0.1") == 1, 30, what="a connection released")
        with server.connect() as fourth:
            fourth.sendall(b"GET /x HTTP/1.1\r\nHost: master\r\n\r\n")
            assert fourth.recv(65536).startswith(b"HTTP/1.1 200")
        second.close()


def test_connections_past_the_total_cap_get_a_503_even_from_a_trusted_proxy() -> None:
    settings = ServerConfig(header_read_timeout=60, body_read_timeout=60)
    with serve(settings, ConnectionCaps(total=2, per_address=1, trusted_proxies=["127.0.0.0/8"])) as server:
        # a trusted proxy speaks for many clients: the per-address cap (1) does not hold it, the total does
        held = [server.connect(), server.connect()]
        for sock in held:
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: master\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")
        with server.connect() as third:
            raw = answer(third)
        assert status_of(raw) == 503 and b"server.max_connections:" in raw
        for sock in held:
            sock.close()


def test_a_websocket_leaves_its_addresss_count() -> None:
    """Agents behind one NAT address hold one WebSocket each: they must not use up the address's cap."""
    from websockets.sync.client import connect

    settings = ServerConfig(header_read_timeout=60, body_read_timeout=60)
    with (
        serve(settings, ConnectionCaps(total=100, per_address=1, trusted_proxies=[])) as server,
        connect(f"ws://127.0.0.1:{server.port}/agents/ws"),
        connect(f"ws://127.0.0.1:{server.port}/agents/ws"),
    ):
        assert server.caps.open_from("127.0.0.1") == 0
        with server.connect() as sock:
            sock.sendall(b"GET /x HTTP/1.1\r\nHost: master\r\n\r\n")
            assert sock.recv(65536).startswith(b"HTTP/1.1 200")


def test_rare_log_says_once_a_minute_how_many_more(caplog) -> None:
    import logging

    now = [0.0]
    rare = RareLog(logging.getLogger("test.rare"), every=60, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="test.rare"):
        for t in (0, 1, 2, 30, 61, 62):
            now[0] = t
            rare.warn("kind", f"refused at {t}")
    assert [r.getMessage() for r in caplog.records] == [
        "refused at 0",
        "refused at 61 (3 more like it in the last 61 s)",
    ]


def test_a_request_answered_before_its_body_arrived_closes_the_connection() -> None:
    """The master answers a body over its limit (or a stranger's) without reading it; then it closes the
    connection rather than read and drop megabytes, or a body that never ends. The answer arrives first."""
    import httpx

    settings = ServerConfig(header_read_timeout=60, body_read_timeout=60)
    with serve(settings, ConnectionCaps(total=100, per_address=100, trusted_proxies=[])) as server:
        body = b"x" * (4 * 1024 * 1024)
        with httpx.Client(timeout=30) as client:
            for _ in range(3):
                assert client.post(f"http://127.0.0.1:{server.port}/early", content=body).status_code == 413
        with server.connect() as sock:
            sock.sendall(b"POST /early HTTP/1.1\r\nHost: master\r\nContent-Length: 100000000\r\n\r\nxxxx")
            assert status_of(sock.recv(65536)) == 413
            with pytest.raises(OSError):  # the master reads no more of it: the connection is gone
                for _ in range(100):
                    sock.sendall(b"x" * 1024 * 1024)
        assert server.seen.bodies == []
