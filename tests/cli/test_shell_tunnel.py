"""`pedl shell tunnel ID` (ssh's ProxyCommand) as its own process: stdin goes out as binary WebSocket
messages to /proxy/ID/ with the user's token and what comes back reaches stdout, against a WebSocket
server of the test and through a real master's proxy; a refused tunnel says why and exits 1."""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.datastructures import Headers
from websockets.http11 import Response
from websockets.sync.server import Server, ServerConnection, serve

from pedl.cli.auth_store import AuthStore
from pedl.cli.shell_tunnel import tunnel_url
from pedl.devcluster import pedl_command
from tests.cli.ntsc_live import Live

TASK = "0b7e4c4e-1f0a-4d7b-9d5e-8f1c2a3b4c5d"


class EchoServer:
    """Answers each binary message with the same bytes reversed; records each request's path and
    Authorization; with `refuse`, answers the handshake with that status and a JSON message."""

    def __init__(self, refuse: int | None = None) -> None:
        self.seen: list[tuple[str, str]] = []
        self.refuse = refuse
        self.server: Server = serve(self._handle, "127.0.0.1", 0, compression=None, process_request=self._check)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.socket.getsockname()[1]

    def _check(self, conn: ServerConnection, request) -> Response | None:  # noqa: ANN001
        self.seen.append((request.path, request.headers.get("Authorization", "")))
        if self.refuse is None:
            return None
        body = json.dumps({"message": "not yours"}).encode()
        return Response(self.refuse, "Refused", Headers({"Content-Type": "application/json",
                                                         "Content-Length": str(len(body))}), body)

    def _handle(self, conn: ServerConnection) -> None:
        for message in conn:
            conn.send(message[::-1] if isinstance(message, bytes) else message)


@pytest.fixture
def echo() -> Iterator[EchoServer]:
    server = EchoServer()
    server.thread.start()
    yield server
    server.server.shutdown()


def tunnel(master_url: str, config_dir: Path, task_id: str = TASK) -> subprocess.Popen:
    env = {**os.environ, "PEDL_CONFIG_DIR": str(config_dir)}
    return subprocess.Popen([*pedl_command(), "-m", master_url, "shell", "tunnel", task_id], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def exchange(proc: subprocess.Popen, data: bytes) -> bytes:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(data)
    proc.stdin.flush()
    got = b""
    while len(got) < len(data):
        chunk = os.read(proc.stdout.fileno(), 65536)
        assert chunk, f"the tunnel closed early: {proc.stderr.read() if proc.stderr else b''!r}"
        got += chunk
    return got


def test_the_url_follows_the_masters_scheme() -> None:
    assert tunnel_url("http://m:8080", TASK) == f"ws://m:8080/proxy/{TASK}/"
    assert tunnel_url("https://m:8443", TASK) == f"wss://m:8443/proxy/{TASK}/"


def test_stdin_and_stdout_are_carried_as_binary_messages_with_the_token(echo: EchoServer, tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{echo.port}"
    AuthStore(tmp_path / "auth.json").set_token(url, "determined", "tok-123")
    proc = tunnel(url, tmp_path)
    try:
        assert exchange(proc, b"SSH-2.0-OpenSSH\r\n") == b"\n\rHSSnepO-0.2-HSS"
        assert exchange(proc, bytes(range(256))) == bytes(range(256))[::-1]  # any byte, unchanged
        proc.stdin.close()  # ssh is done: the tunnel closes and ends
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        proc.kill()
    assert echo.seen == [(f"/proxy/{TASK}/", "Bearer tok-123")]


def test_a_refused_tunnel_says_why_and_exits_1(tmp_path: Path) -> None:
    server = EchoServer(refuse=404)
    server.thread.start()
    try:
        url = f"http://127.0.0.1:{server.port}"
        AuthStore(tmp_path / "auth.json").set_token(url, "determined", "tok-123")
        done = subprocess.run([*pedl_command(), "-m", url, "shell", "tunnel", TASK], capture_output=True, text=True,
                              env={**os.environ, "PEDL_CONFIG_DIR": str(tmp_path)}, stdin=subprocess.DEVNULL,
                              timeout=60)
    finally:
        server.server.shutdown()
    assert done.returncode == 1
    assert "refused the tunnel" in done.stderr and "HTTP 404: not yours" in done.stderr, done.stderr


def test_through_the_masters_proxy_to_a_tasks_service(live: Live, echo: EchoServer, tmp_path: Path) -> None:
    """The master relays the tunnel's messages to the service its task registered (a notebook's here:
    the tunnel does not care which kind), after logging in as `determined` on its own."""
    task_id = live.launch("notebooks")["id"]
    [task] = live.start_all()
    live.serve(task, echo.port)
    proc = tunnel(live.url, tmp_path, task_id)
    try:
        assert exchange(proc, b"through the master") == b"retsam eht hguorht"
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0, proc.stderr.read()
    finally:
        proc.kill()
    assert echo.seen[0][0] == f"/proxy/{task_id}/"
