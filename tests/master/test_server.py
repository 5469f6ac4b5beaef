"""`pedl master run` as a real process: its log says where it listens, its database (never the
password) and its pools; SIGTERM stops it cleanly (status 0) and says so."""

from __future__ import annotations

import re
import signal
import socket
from pathlib import Path

import httpx
import pytest
import yaml

from pedl.devcluster import ManagedProcess, pedl_command, wait_for
from tests.support.databases import PG_PASSWORD, fresh_postgres_db

pytestmark = pytest.mark.e2e

POOLS = [
    {"pool_name": "default"},
    {"pool_name": "cpu", "provider": {"type": "local", "max_instances": 2, "instance_type": "box"}},
]
LISTENING = re.compile(r"pedl master listening on http://127\.0\.0\.1:(\d+)\n")


def start_master(tmp_path: Path, config: dict) -> ManagedProcess:
    path = tmp_path / "master.yaml"
    path.write_text(yaml.safe_dump({"host": "127.0.0.1", "data_dir": str(tmp_path / "data"), **config}))
    return ManagedProcess([*pedl_command(), "master", "run", "--config", str(path)], tmp_path / "master.log").start()


def run_and_stop(master: ManagedProcess) -> str:
    """Wait until the master serves on the port its log names, SIGTERM it, return its whole log."""

    def listening() -> int | None:
        if not master.alive():
            raise AssertionError(f"the master exited: {master.log_text()}")
        found = LISTENING.search(master.log_text())
        return int(found.group(1)) if found else None

    try:
        port = wait_for(listening, 60, what="the master's 'listening on' line")
        assert httpx.get(f"http://127.0.0.1:{port}/info", timeout=5).status_code == 200
        master.signal(signal.SIGTERM)
        assert master.stop(timeout=30) == 0, master.log_text()
    finally:
        if master.alive():  # a failed wait must not leave the master running after the test
            master.stop(timeout=5)
    return master.log_text()


def test_master_run_logs_its_address_database_and_pools_and_stops_cleanly_on_sigterm(tmp_path: Path) -> None:
    master = start_master(tmp_path, {"port": 0, "resource_pools": POOLS})  # port 0: the log names the real one
    log = run_and_stop(master)
    assert f"database sqlite:///{tmp_path / 'data' / 'pedl.db'}" in log
    assert "resource pool default: static agents (no provider)" in log
    assert "resource pool cpu: local provider, box, 0 to 2 instances" in log
    assert "pedl master stopping on SIGTERM" in log
    assert log.rstrip().endswith("pedl master stopped on SIGTERM")


def test_master_run_logs_a_postgresql_database_without_its_password(tmp_path: Path) -> None:
    from tests.conftest import require_postgres

    require_postgres()
    # with trust authentication (the test default) any password connects; else the real one must
    password = PG_PASSWORD or "never-in-the-log-7f3a"
    with fresh_postgres_db() as db:
        db = {**db, "password": password}
        log = run_and_stop(start_master(tmp_path, {"port": 0, "db": db}))
    where = f"postgresql://{db['user']}@{db['host']}:{db['port']}/{db['name']}?sslmode=disable"
    assert f"database {where}" in log, log
    assert password not in log


def test_master_run_on_a_taken_port_exits_nonzero_and_says_so(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        master = start_master(tmp_path, {"port": taken.getsockname()[1]})
        wait_for(lambda: not master.alive(), 60, what="the master to give up")
        code = master.stop()
    log = master.log_text()
    assert code != 0 and "address already in use" in log.lower(), log
    assert "listening on" not in log


def test_a_certificate_unusable_at_start_is_one_error_line_and_exit_1(tmp_path: Path, caplog) -> None:
    from pedl.config.master_config import load_master_config
    from pedl.master.server import run_master, tls_options
    from tests.support.tls import write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    path = tmp_path / "master.yaml"
    path.write_text(
        yaml.safe_dump(
            {"data_dir": str(tmp_path / "data"), "security": {"tls": {"cert": str(tls.cert), "key": str(tls.key)}}}
        )
    )
    config = load_master_config(path)
    assert tls_options(config) == {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
    tls.key.write_text("replaced since the config was checked\n")
    with pytest.raises(SystemExit) as caught:
        run_master(config)
    assert caught.value.code == 1
    assert f"cannot serve TLS with security.tls (cert {tls.cert}, key {tls.key})" in caplog.text
    assert not (tmp_path / "data").exists()  # nothing was started


def test_a_real_master_cuts_off_stalled_requests_and_logs_an_aborted_body_as_one_line(tmp_path: Path) -> None:
    """A slowloris (half a request line and headers, or half a body) is cut off after server.*_read_timeout;
    a client that hangs up mid-body is one line in the log, no traceback, and no 5xx in /metrics."""
    from pedl.devcluster import Master

    master = Master(tmp_path, {"server": {"header_read_timeout": "1s", "body_read_timeout": "1s"}}).start()
    try:

        def exchange(data: bytes, hang_up: bool = False) -> bytes:
            with socket.create_connection(("127.0.0.1", master.port), timeout=60) as sock:
                sock.sendall(data)
                if hang_up:
                    return b""
                out = b""
                while chunk := sock.recv(65536):
                    out += chunk
                return out

        assert exchange(b"GET /info HTTP/1.1\r\nHost: m").startswith(b"HTTP/1.1 408")
        login = b'POST /api/v1/auth/login HTTP/1.1\r\nHost: m\r\nContent-Length: 100\r\n\r\n{"user'
        assert exchange(login).startswith(b"HTTP/1.1 408")
        for _ in range(3):
            exchange(login, hang_up=True)
        wait_for(
            lambda: master.log_text().count("went away before its request body arrived") == 3,
            60,
            what="three lines of clients that went away",
        )
        log = master.log_text()
        assert "sent no body bytes for 1 s (server.body_read_timeout): POST /api/v1/auth/login" in log, log
        assert "Traceback" not in log and "ERROR" not in log, log
        metrics = httpx.get(f"{master.url}/metrics", headers={"Authorization": f"Bearer {master.token()}"}).text
        login_series = [
            line
            for line in metrics.splitlines()
            if line.startswith("pedl_api_request_duration_seconds_count") and "/auth/login" in line
        ]
        assert login_series and not [line for line in login_series if 'status="5xx"' in line], login_series
    finally:
        master.stop()


def test_a_real_master_ignores_x_forwarded_for_and_logs_the_admin_in_through_its_console_socket(tmp_path: Path) -> None:
    """A client on loopback cannot start a fresh count of failed logins by naming another address in
    X-Forwarded-For (uvicorn trusted it from loopback; security.trusted_proxies is empty by default). The
    admin held up at that address still logs in through data_dir/console.sock, on the master's host."""
    import json
    import os
    import subprocess

    from pedl.cli.auth_store import CONFIG_DIR_ENV
    from pedl.devcluster import Master

    limit = {"failures_per_address": 3, "failures_per_user": 100, "window": "10m"}
    master = Master(tmp_path, {"security": {"login_rate_limit": limit}}).start()
    try:

        def log_in(username: str, password: str, forwarded: str) -> httpx.Response:
            return httpx.post(
                f"{master.url}/api/v1/auth/login",
                headers={"X-Forwarded-For": forwarded},
                content=json.dumps({"username": username, "password": password}),
            )

        assert [log_in(f"guess-{i}", "x", f"192.0.2.{i}").status_code for i in range(3)] == [401, 401, 401]
        held = log_in("admin", "", "192.0.2.99")  # the address is loopback's, whatever the header says
        assert held.status_code == 429, held.text
        console = master.data_dir / "console.sock"
        assert oct(console.stat().st_mode & 0o777) == "0o600"
        env = {**os.environ, CONFIG_DIR_ENV: str(tmp_path / "cli")}
        done = subprocess.run(
            [*pedl_command(), "-m", master.url, "user", "login", "admin", "--console", str(console)],
            input="\n",
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Logged in as 'admin' at {master.url}" in done.stdout
        whoami = subprocess.run(
            [*pedl_command(), "-m", master.url, "user", "whoami"], capture_output=True, text=True, env=env, timeout=120
        )  # the token works over TCP too
        assert "admin" in whoami.stdout, whoami.stdout + whoami.stderr
    finally:
        master.stop()
    assert not console.exists()  # removed at the stop


def test_a_real_master_answers_while_strangers_post_4_mb_logins(tmp_path: Path) -> None:
    """benchmarks/front_door_stall.py's load, without its timing: 8 anonymous senders of 4 MB bodies to the
    login route get a 413 each (by Content-Length, unread), and a logged-in monitor's GET /api/v1/me keeps
    being answered meanwhile."""
    import threading

    from pedl.devcluster import Master

    master = Master(tmp_path).start()
    body = b"[" + b"1," * 1_999_999 + b"1]"  # 4 MB: within limits.max_request_body_bytes, a login's 1,000 times
    statuses: list[int | str] = []
    stop = threading.Event()

    def send() -> None:
        with httpx.Client(timeout=60) as client:
            while not stop.is_set():
                try:
                    statuses.append(client.post(f"{master.url}/api/v1/auth/login", content=body).status_code)
                except httpx.TransportError as exc:
                    statuses.append(type(exc).__name__)

    senders = [threading.Thread(target=send, daemon=True) for _ in range(8)]
    try:
        with httpx.Client(
            base_url=master.url, headers={"Authorization": f"Bearer {master.token()}"}, timeout=60
        ) as monitor:
            for sender in senders:
                sender.start()
            wait_for(lambda: len(statuses) >= 16, 120, what="the senders' first answers")
            for _ in range(20):
                assert monitor.get("/api/v1/me").json()["user"]["username"] == "determined"
    finally:
        stop.set()
        for sender in senders:
            sender.join(timeout=60)
        master.stop()
    assert set(statuses) == {413}, sorted(set(map(str, statuses)))
