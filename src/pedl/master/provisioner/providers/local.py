"""The local provider: each "instance" is a `pedl agent run --id <instance id>` process the master
starts on this machine, after an optional boot delay. The registry file in the data directory
plays the role of the cloud's tags: only instances listed there, under this cluster and pool, are
ours, and they are found again after a master restart.

It has a spot market, for pools with `spot: true` and for tests: a spot launch makes instances that
the registry and `list_instances` mark spot. The file `<data_dir>/local-instances/spot-capacity`
says whether there is spot capacity. It holds one word: `unavailable` means none, and a spot launch
then fails as EC2's does (a capacity error, InsufficientInstanceCapacity) and starts nothing;
`available`, like no file at all, means there is; anything else fails the launch as invalid config.
It is read at each spot launch, so writing it opens or closes the market while the master runs.
Running spot instances are never interrupted."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shlex
import signal
import stat
import subprocess
import threading
import uuid
from pathlib import Path

from pedl.config.provider_config import LocalProviderConfig
from pedl.devcluster import pedl_command
from pedl.master.provisioner.providers.base import (
    CloudError,
    CloudErrorKind,
    CloudInstance,
    CloudState,
    ForeignInstance,
    LaunchRequest,
)

log = logging.getLogger(__name__)
KILL_GRACE = 15.0
SPOT_CAPACITY_FILE = "spot-capacity"
TOKEN_FILE = "agent-token"  # the enrollment secret, handed to the agents this provider starts (mode 0600)
SPOT_MARKET_WORDS = ("available", "unavailable")


_REGISTRY_LOCKS: dict[Path, threading.Lock] = {}
_REGISTRY_LOCKS_GUARD = threading.Lock()


def _registry_lock(registry: Path) -> threading.Lock:
    """One lock per registry file: a master's pools each have a provider, and all of them read, change
    and write the same registry.json (with a lock each, one pool's write lost the other's instances, whose
    agents then outlived the master: nothing listed them to end)."""
    with _REGISTRY_LOCKS_GUARD:
        return _REGISTRY_LOCKS.setdefault(registry.resolve(), threading.Lock())


class LocalProvider:
    name = "local"

    def __init__(
        self,
        cfg: LocalProviderConfig,
        *,
        pool: str,
        cluster_id: str,
        data_dir: Path,
        master_url: str,
        agent_token: str | None,
        clock,
        master_cert: Path | None = None,
    ) -> None:  # a Clock
        self.cfg, self.pool, self.cluster_id, self.master_url = cfg, pool, cluster_id, master_url
        self.agent_token, self.clock = agent_token, clock
        self.master_cert = master_cert  # the CA file agents verify an https:// master against
        self.dir = data_dir / "local-instances"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.registry = self.dir / "registry.json"
        self.spot_capacity = self.dir / SPOT_CAPACITY_FILE  # the spot market: see the module docstring
        self._lock = _registry_lock(self.registry)
        self._children: dict[str, subprocess.Popen] = {}
        self._by_token: dict[str, list[CloudInstance]] = {}

    # -- registry ------------------------------------------------------------------------------

    def _load(self) -> dict[str, dict]:
        try:
            return json.loads(self.registry.read_text())
        except (OSError, ValueError):
            return {}

    def _save(self, data: dict[str, dict]) -> None:
        tmp = self.registry.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        tmp.replace(self.registry)

    def _ours(self, entry: dict) -> bool:
        return entry.get("cluster_id") == self.cluster_id and entry.get("pool") == self.pool

    def _alive(self, inst_id: str, entry: dict) -> bool:
        """Whether the instance's process still runs. A pid alone could name another process by now
        (pids are reused), so the process must also have the start time recorded at launch; an entry
        from before start times were recorded is checked by its argv, which names the instance."""
        child = self._children.get(inst_id)
        if child is not None:
            return child.poll() is None
        pid = entry["pid"]
        if "started" in entry:
            return _start_time(pid) == entry["started"]
        return inst_id in _cmdline(pid)

    # -- the contract --------------------------------------------------------------------------

    def list_instances(self) -> list[CloudInstance]:
        with self._lock:
            data = self._load()
            out, changed = [], False
            now = self.clock.now()
            for inst_id, e in list(data.items()):
                if not self._ours(e):
                    continue
                if not self._alive(inst_id, e):
                    del data[inst_id]
                    self._children.pop(inst_id, None)
                    changed = True
                    continue
                booted = now >= e["launched_at"] + self.cfg.boot_delay
                state = (
                    CloudState.TERMINATING
                    if e.get("terminating")
                    else (CloudState.RUNNING if booted else CloudState.PENDING)
                )
                out.append(
                    CloudInstance(
                        inst_id,
                        e["instance_type"],
                        state,
                        e["launched_at"],
                        spot=bool(e.get("spot", False)),
                        address="127.0.0.1",
                    )
                )
            if changed:
                self._save(data)
            return out

    def launch(self, request: LaunchRequest) -> list[CloudInstance]:
        with self._lock:
            if request.token in self._by_token:
                return self._by_token[request.token]
            if request.spot and not self._spot_capacity():
                raise CloudError(
                    CloudErrorKind.CAPACITY,
                    f"there is no spot capacity for {request.count} x {request.instance_type} "
                    f"({self.spot_capacity} says unavailable)",
                    code="InsufficientInstanceCapacity",
                )
            data = self._load()
            created = []
            for _ in range(request.count):
                inst_id = f"local-{self.pool}-{uuid.uuid4().hex[:10]}"
                try:
                    pid, started = self._spawn(inst_id)
                except OSError as exc:
                    raise CloudError(CloudErrorKind.UNAVAILABLE, f"cannot start a local agent: {exc}") from exc
                now = self.clock.now()
                data[inst_id] = {
                    "pid": pid,
                    "started": started,
                    "pool": self.pool,
                    "cluster_id": self.cluster_id,
                    "launched_at": now,
                    "instance_type": request.instance_type,
                    "token": request.token,
                    "spot": request.spot,
                }
                created.append(
                    CloudInstance(
                        inst_id, request.instance_type, CloudState.PENDING, now, spot=request.spot, address="127.0.0.1"
                    )
                )
            self._save(data)
            self._by_token[request.token] = created
            return created

    def _spot_capacity(self) -> bool:
        """Whether the spot market file allows a spot launch now (no file: it does)."""
        try:
            text = self.spot_capacity.read_text()
        except FileNotFoundError:
            return True
        except OSError as exc:
            raise CloudError(CloudErrorKind.UNAVAILABLE, f"cannot read {self.spot_capacity}: {exc}") from exc
        word = text.strip().lower()
        if word not in SPOT_MARKET_WORDS:
            raise CloudError(
                CloudErrorKind.INVALID_CONFIG,
                f"{self.spot_capacity}: {text.strip()[:40]!r} is neither 'available' nor 'unavailable'",
            )
        return word == "available"

    def _spawn(self, inst_id: str) -> tuple[int, int | None]:
        """Start the instance's process: its pid and its start time (what `_alive` checks)."""
        argv = [
            *pedl_command(),
            "agent",
            "run",
            "--master",
            self.master_url,
            "--id",
            inst_id,
            "--slots",
            str(self.cfg.slots_per_instance),
            "--resource-pool",
            self.pool,
            "--work-dir",
            str(self.dir / inst_id),
        ]
        script = ""
        if self.cfg.startup_script:
            script += self.cfg.startup_script.rstrip() + "\n"
        if self.cfg.boot_delay > 0:
            script = f"sleep {self.cfg.boot_delay:g}\n" + script
        if self.agent_token:
            # a file only the master's user reads: argv is readable by every process of the host, and a
            # variable would be in the agent's environment, which its tasks and children could inherit
            argv += ["--token-file", str(self._token_file())]
        script += "exec " + " ".join(shlex.quote(a) for a in argv)
        env = dict(os.environ)
        env.pop("PEDL_AGENT_TOKEN", None)
        if self.master_cert is not None:
            env["PEDL_MASTER_CERT"] = str(self.master_cert)
        log_file = open(self.dir / f"{inst_id}.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            # the id is in argv (and so in /proc/<pid>/cmdline) from the first moment, boot delay or not
            child = subprocess.Popen(
                ["/bin/sh", "-c", script, inst_id],
                stdout=log_file,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            log_file.close()
        self._children[inst_id] = child
        # the start time is the fork's, fixed before Popen returns (the new argv shows in /proc a
        # moment after, which is why argv is not what identifies the process)
        return child.pid, _start_time(child.pid)

    def _token_file(self) -> Path:
        """The enrollment secret in `<data_dir>/local-instances/agent-token`, made with mode 0600 (so it is
        never readable by others, not even for a moment) and renamed into place when it changes."""
        path = self.dir / TOKEN_FILE
        assert self.agent_token
        with contextlib.suppress(OSError):
            if path.read_text().strip() == self.agent_token and stat.S_IMODE(path.stat().st_mode) == 0o600:
                return path
        tmp = self.dir / f".{TOKEN_FILE}.{os.getpid()}.{threading.get_ident()}"
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, (self.agent_token + "\n").encode())
        finally:
            os.close(fd)
        os.replace(tmp, path)
        return path

    def terminate(self, ids: list[str]) -> None:
        with self._lock:
            data = self._load()
            for inst_id in ids:
                e = data.get(inst_id)
                if e is None:
                    if inst_id.startswith(f"local-{self.pool}-"):
                        continue  # already gone
                    raise ForeignInstance(f"{inst_id} is not an instance of pool {self.pool}")
                if not self._ours(e):
                    raise ForeignInstance(f"{inst_id} belongs to another cluster or pool")
                e["terminating"] = True
                if self._alive(inst_id, e):
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.killpg(e["pid"], signal.SIGTERM)
                    timer = threading.Timer(KILL_GRACE, self._kill_hard, args=(inst_id, dict(e)))
                    timer.daemon = True
                    timer.start()
            self._save(data)

    def _kill_hard(self, inst_id: str, entry: dict) -> None:
        if self._alive(inst_id, entry):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(entry["pid"], signal.SIGKILL)
        child = self._children.get(inst_id)
        if child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                child.wait(1)

    def close(self) -> None:
        """The master is stopping: its local instances keep running, as cloud instances would."""


def _cmdline(pid: int) -> str:
    """The process's argv as one line; empty when there is no such process."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _start_time(pid: int) -> int | None:
    """When the process started, in clock ticks since boot (field 22 of /proc/<pid>/stat); None when
    there is no such process or it has exited (a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": the state is field 3
    if not fields or fields[0] == b"Z":
        return None
    return int(fields[19])
