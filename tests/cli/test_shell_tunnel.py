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

    def _check(self, conn: ServerConnection, request) -> Response | None:
        self.seen.append((request.path, request.headers.get("Authorization", "")))
        if self.refuse is None:
            return None
        body = json.dumps({"message": "not yours"}).encode()
        return Response(
            self.refuse,
            "Refused",
            Headers({"Content-Type": "application/json", "Content-Length": str(len(body))}),
            body,
        )

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
    return subprocess.Popen(
        [*pedl_command(), "-m", master_url, "shell", "tunnel", task_id],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


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
        done = subprocess.run(
            [*pedl_command(), "-m", url, "shell", "tunnel", TASK],
            capture_output=True,
            text=True,
            env={**os.environ, "PEDL_CONFIG_DIR": str(tmp_path)},
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
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


def require_openssh() -> str:
    """sshd's absolute path; without OpenSSH the test skips, or fails under CI (make test installs it)."""
    import shutil

    from pedl.launch.shell_sshd import find_sshd

    sshd = find_sshd()
    missing = None
    if sshd is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        missing = "OpenSSH is missing (apt-get install openssh-server openssh-client; make test installs it)"
    elif os.geteuid() == 0 and not Path("/run/sshd").is_dir():
        missing = "sshd run as root needs /run/sshd (mkdir -p /run/sshd)"
    if missing:
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    return str(sshd)


class SshBridge:
    """A WebSocket server in front of an sshd: what a shell's service is to the master's proxy. Each
    WebSocket is one TCP connection to the sshd, bytes copied both ways."""

    def __init__(self, sshd_port: int) -> None:
        self.sshd_port = sshd_port
        self.server: Server = serve(self._handle, "127.0.0.1", 0, compression=None, max_size=None)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _handle(self, conn: ServerConnection) -> None:
        import socket

        with socket.create_connection(("127.0.0.1", self.sshd_port)) as tcp:

            def to_ws() -> None:
                while chunk := tcp.recv(65536):
                    conn.send(chunk)
                conn.close()

            threading.Thread(target=to_ws, daemon=True).start()
            for message in conn:
                tcp.sendall(message if isinstance(message, bytes) else message.encode())


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """An sshd of this test on a free loopback port that takes one key pair's key: (port, private key)."""
    from pedl.common.ports import free_port
    from pedl.devcluster import wait_for

    sshd_path = require_openssh()
    d = tmp_path / "sshd"
    d.mkdir(mode=0o700)
    for name in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "user_key.pub").read_text())
    (d / "authorized_keys").chmod(0o600)
    port = free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        f"PasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\nStrictModes no\n"
        f"UsePAM no\nPidFile {d / 'sshd.pid'}\nPermitRootLogin prohibit-password\n"
    )
    proc = subprocess.Popen(
        [sshd_path, "-D", "-e", "-f", str(d / "sshd_config")],
        stdout=subprocess.DEVNULL,
        stderr=open(d / "sshd.log", "wb"),  # noqa: SIM115 - closed with the process
    )
    try:
        import socket

        wait_for(
            lambda: socket.create_connection(("127.0.0.1", port), timeout=1).close() or True, 30, what="sshd to listen"
        )
        yield port, d / "user_key"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_ssh_runs_a_command_through_the_tunnel(sshd: tuple[int, Path], tmp_path: Path) -> None:
    """The ssh command `pedl shell open` runs (ssh_argv, proxy_command), for real: OpenSSH's ssh, the
    tunnel as its ProxyCommand, and an sshd behind a WebSocket server standing in for the master."""
    import getpass

    from pedl.cli.client import MasterClient
    from pedl.cli.shells import proxy_command, ssh_argv

    port, key = sshd
    bridge = SshBridge(port)
    bridge.thread.start()
    try:
        url = f"http://127.0.0.1:{bridge.server.socket.getsockname()[1]}"
        config = tmp_path / "cli"
        AuthStore(config / "auth.json").set_token(url, "determined", "tok-ssh")
        shell = {"id": TASK, "agentUserGroup": {"user": getpass.getuser()}}
        argv = ssh_argv(
            shell,
            key,
            proxy_command(MasterClient(url, user="determined"), None),
            ["-F", "/dev/null", "-o", "BatchMode=yes", "echo", "hello from sshd"],
        )
        # ssh reads options after the destination too (`pedl shell open ID -- -L ...`), then the command
        done = subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PEDL_CONFIG_DIR": str(config)},
            stdin=subprocess.DEVNULL,
        )
    finally:
        bridge.server.shutdown()
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello from sshd\n"
