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

POOLS = [{"pool_name": "default"},
         {"pool_name": "cpu", "provider": {"type": "local", "max_instances": 2, "instance_type": "box"}}]
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
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path / "data"),
                                    "security": {"tls": {"cert": str(tls.cert), "key": str(tls.key)}}}))
    config = load_master_config(path)
    assert tls_options(config) == {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}
    tls.key.write_text("replaced since the config was checked\n")
    with pytest.raises(SystemExit) as caught:
        run_master(config)
    assert caught.value.code == 1
    assert f"cannot serve TLS with security.tls (cert {tls.cert}, key {tls.key})" in caplog.text
    assert not (tmp_path / "data").exists()  # nothing was started
