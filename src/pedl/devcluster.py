"""A cluster of real processes on this machine: a master and local agents, each started as
`pedl master run` / `pedl agent run`. Used by `make demo`, the end-to-end tests and benchmarks."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import yaml

from pedl.common.ports import free_port
from pedl.master.agent_token import token_path

DEV_PASSWORD_HASHING = {"time_cost": 2, "memory_kib": 19456, "parallelism": 1}  # security.password_hashing floor


def pedl_command() -> list[str]:
    exe = Path(sys.executable).parent / "pedl"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "pedl.cli.main"]


def wait_for(predicate: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = predicate()
            if value:
                return value
        except Exception as exc:  # keep polling; report the last failure
            last_exc = exc
        time.sleep(interval)
    raise TimeoutError(
        f"timed out after {timeout:g}s waiting for {what}" + (f" (last error: {last_exc})" if last_exc else "")
    )


class ManagedProcess:
    def __init__(self, argv: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
        self.argv, self.log_path = argv, log_path
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")  # noqa: SIM115 - lives as long as the process
        self.proc = subprocess.Popen(
            self.argv, stdout=self._log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            os.kill(self.pid, sig)

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.proc is None:
            return None
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(5)
        self._log.close()
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        if self.proc is not None and self.alive():
            self.proc.kill()
            self.proc.wait(5)

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


@functools.cache
def _system_ssl_context() -> ssl.SSLContext:
    return httpx.create_ssl_context()


class Master(ManagedProcess):
    def __init__(self, work_dir: Path, config: dict[str, Any] | None = None, port: int | None = None) -> None:
        self.port = port or free_port()
        self.work_dir = work_dir
        cfg = {"port": self.port, "host": "127.0.0.1", "data_dir": str(work_dir / "master-data"), **(config or {})}
        # a development cluster hashes passwords at the lowest costs master.yaml allows (a fifth of the CPU
        # of the defaults' per login and start: most of a short-lived master's work in the test suite)
        cfg["security"] = {"password_hashing": DEV_PASSWORD_HASHING, **(cfg.get("security") or {})}
        self.data_dir = Path(cfg["data_dir"])
        self._agent_token: str | None = cfg.get("agent_token")
        self.config_path = work_dir / "master.yaml"
        work_dir.mkdir(parents=True, exist_ok=True)
        self.config_path.write_text(yaml.safe_dump(cfg))
        super().__init__([*pedl_command(), "master", "run", "--config", str(self.config_path)], work_dir / "master.log")
        self._token: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _verify(self) -> Any:
        """What this client's requests verify the master with (httpx's `verify`): the system CAs, in
        one SSL context shared by every call (httpx builds one per call for `verify=True`, loading
        the CA bundle: ~30 ms of CPU, and callers poll the master several times a second); a master
        serving TLS with its own CA overrides it."""
        return _system_ssl_context()

    @property
    def agent_token(self) -> str:
        """The token agents must present: the config's agent_token, else the one the master created
        in its data directory on its first start (so read it once the master is up)."""
        return self._agent_token or token_path(self.data_dir).read_text().strip()

    def stop(self, timeout: float = 15.0) -> int | None:
        rc = super().stop(timeout)
        self.stop_local_instances()
        return rc

    def stop_local_instances(self) -> None:
        """Local-provider agents outlive the master on purpose (like cloud instances); a test or
        demo that is done with the cluster ends them here."""
        registry = self.work_dir / "master-data" / "local-instances" / "registry.json"
        try:
            entries = json.loads(registry.read_text())
        except (OSError, ValueError):
            return
        for entry in entries.values():
            with contextlib.suppress(ProcessLookupError, PermissionError, KeyError):
                os.killpg(entry["pid"], signal.SIGTERM)

    def start(self, timeout: float = 60.0) -> Master:
        super().start()

        def up() -> bool:
            if not self.alive():
                raise RuntimeError(f"master exited: {self.log_text()[-2000:]}")
            return httpx.get(f"{self.url}/info", timeout=2, verify=self._verify()).status_code == 200

        wait_for(up, timeout, what=f"the master on {self.url}")
        self._token = None
        return self

    # -- a tiny REST client for tests and the demo --
    def token(self, username: str = "determined", password: str = "") -> str:
        if self._token is None:
            r = httpx.post(
                f"{self.url}/api/v1/auth/login",
                verify=self._verify(),
                content=json.dumps({"username": username, "password": password, "isHashed": False}),
            )
            r.raise_for_status()
            self._token = str(r.json()["token"])
        return self._token

    def api(self, method: str, path: str, body: Any = None, expect: int | None = 200, **params: Any) -> Any:
        r = httpx.request(
            method,
            f"{self.url}{path}",
            params=params or None,
            verify=self._verify(),
            content=None if body is None else json.dumps(body),
            headers={"Authorization": f"Bearer {self.token()}"},
            timeout=30,
        )
        if expect is not None and r.status_code != expect:
            raise AssertionError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
        try:
            return r.json()
        except ValueError:
            return r.text


class LocalAgent(ManagedProcess):
    """A static agent. It needs the master's token (`Master.agent_token`); without one it runs with
    --no-token, which only a master with security.allow_unauthenticated_loopback_agents accepts."""

    def __init__(
        self,
        work_dir: Path,
        master_url: str,
        agent_id: str,
        slots: int = 1,
        pool: str = "default",
        token: str | None = None,
    ) -> None:
        argv = [
            *pedl_command(),
            "agent",
            "run",
            "--master",
            master_url,
            "--id",
            agent_id,
            "--slots",
            str(slots),
            "--resource-pool",
            pool,
            "--work-dir",
            str(work_dir / f"agent-{agent_id}"),
        ]
        if token:
            # in a file of mode 0600, not in argv, which every user of this host can read in /proc
            token_file = work_dir / f"agent-{agent_id}.token"
            work_dir.mkdir(parents=True, exist_ok=True)
            token_file.unlink(missing_ok=True)
            fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(token + "\n")
            argv += ["--token-file", str(token_file)]
        else:
            argv.append("--no-token")
        super().__init__(argv, work_dir / f"agent-{agent_id}.log", env={"PEDL_AGENT_TOKEN": ""})
        self.agent_id = agent_id


def agent_connected(master: Master, agent_id: str) -> bool:
    agents = master.api("GET", "/api/v1/agents")["agents"]
    return any(a["id"] == agent_id and a.get("connected") for a in agents)


def wait_experiment(master: Master, exp_id: int, states: set[str], timeout: float = 180.0) -> dict:
    def done() -> dict | None:
        exp = master.api("GET", f"/api/v1/experiments/{exp_id}")["experiment"]
        return exp if exp["state"] in states else None

    return wait_for(done, timeout, interval=0.5, what=f"experiment {exp_id} to reach {sorted(states)}")
