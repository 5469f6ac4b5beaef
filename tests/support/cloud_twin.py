"""A cloud twin for end-to-end tests on moto: what the startup script does on a real instance.

A thread in the test process polls moto with boto3 (directly, not through a fault proxy) for
instances that carry the pool's tag pair and pool tag. For each one that reaches `running` it
starts a real `pedl agent run --id <instance id> --slots <slots of the type> --master <url>
--resource-pool <pool>` process, with the enrollment secret the instance's user data carries (its
single-use one; the cluster's agent token only where the user data has none); for spot instances
it adds `--spot-watch --imds-url` with a FakeMetadataServer of that instance's own, so that a test
can raise the two-minute notice
(`interrupt`). When the instance goes (shutting-down, terminated, stopped, or no longer listed)
the agent and everything it started are SIGKILLed: the machine vanished.

    twin = CloudTwin(moto_url, master.url, work_dir, tag_key="pedl-e2e", tag_value="agents").start()
    twin.skip_next(1)  # the next instance boots but its agent never starts
    ...
    twin.stop()
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shlex
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pedl.config import instance_types
from pedl.devcluster import ManagedProcess, pedl_command
from tests.support.moto_server import FakeMetadataServer, ec2_client

log = logging.getLogger(__name__)
POOL_TAG = "pedl-resource-pool"
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")


def slots_of_type(instance_type: str) -> int:
    """One slot per GPU (CPU-only types: one per vCPU), as the provider config counts them."""
    info = instance_types.lookup(instance_type)
    if info is None:
        return 1
    return info.gpus or info.vcpus


def descendants(pid: int) -> list[int]:
    """Every live process below `pid` (from /proc), children first found first."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...; comm may hold spaces and parentheses
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def kill_tree(pid: int) -> None:
    """SIGKILL a process, its process group and every descendant's group (task processes run in
    sessions of their own): nothing of the machine survives."""
    victims = descendants(pid)
    for p in (pid, *victims):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(p, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, signal.SIGKILL)


@dataclass
class Machine:
    """One instance as the twin sees it."""

    instance_id: str
    instance_type: str
    spot: bool
    slots: int
    agent: ManagedProcess | None = None
    imds: FakeMetadataServer | None = None
    started_at: float | None = None  # monotonic, when the agent process was started
    gone_at: float | None = None  # monotonic, when the instance was seen gone and the agent killed
    skipped: bool = False  # booted without an agent (a broken startup script)
    tags: dict[str, str] = field(default_factory=dict)
    enrolled_with: str = ""  # "user data": the instance's own secret; "agent token": the cluster's
    secret: str | None = None  # the secret its user data carries


class CloudTwin:
    def __init__(
        self,
        moto_url: str,
        master_url: str,
        work_dir: Path,
        *,
        tag_key: str,
        tag_value: str,
        pool: str = "default",
        region: str = "us-east-1",
        poll_interval: float = 0.2,
        spot_watch: bool = True,
        agent_token: str | None = None,
    ) -> None:
        self.moto_url, self.master_url, self.work_dir = moto_url, master_url, work_dir
        self.tag_key, self.tag_value, self.pool = tag_key, tag_value, pool
        self.poll_interval, self.spot_watch, self.agent_token = poll_interval, spot_watch, agent_token
        self.ec2 = ec2_client(moto_url, region)
        self.machines: dict[str, Machine] = {}
        self.errors: list[str] = []
        self._skip = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- what tests use ------------------------------------------------------------------------

    def start(self) -> CloudTwin:
        self._thread = threading.Thread(target=self._run, name="cloud-twin", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        with self._lock:
            for m in self.machines.values():
                self._vanish(m)

    def skip_next(self, n: int = 1) -> None:
        """The next n instances to reach running get no agent (their startup script failed)."""
        with self._lock:
            self._skip += n

    def agent(self, instance_id: str) -> ManagedProcess | None:
        with self._lock:
            m = self.machines.get(instance_id)
            return m.agent if m else None

    def running_agents(self) -> list[str]:
        with self._lock:
            return [i for i, m in self.machines.items() if m.agent is not None and m.agent.alive()]

    def interrupt(self, instance_id: str, action: str = "terminate", in_seconds: float = 120.0) -> None:
        """Raise the spot interruption notice in this instance's metadata service."""
        with self._lock:
            m = self.machines[instance_id]
            if m.imds is None:
                raise ValueError(f"{instance_id} has no metadata server (not spot, or spot_watch off)")
            when = (datetime.now(UTC) + timedelta(seconds=in_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
            m.imds.ec2["spot/instance-action"] = json.dumps({"action": action, "time": when})

    def terminate(self, instance_id: str) -> None:
        """End an instance in moto, as the cloud (or an admin) would; the twin then kills its agent."""
        self.ec2.terminate_instances(InstanceIds=[instance_id])

    # -- the loop ------------------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # moto reset between tests, a slow call: keep going
                self.errors.append(f"{type(exc).__name__}: {exc}")
                del self.errors[:-20]
            self._stop.wait(self.poll_interval)

    def poll(self) -> None:
        filters = [
            {"Name": f"tag:{self.tag_key}", "Values": [self.tag_value]},
            {"Name": f"tag:{POOL_TAG}", "Values": [self.pool]},
        ]
        seen: dict[str, dict[str, Any]] = {}
        for page in self.ec2.get_paginator("describe_instances").paginate(Filters=filters):
            for reservation in page.get("Reservations") or []:
                for inst in reservation.get("Instances") or []:
                    seen[inst["InstanceId"]] = inst
        with self._lock:
            for inst_id, inst in seen.items():
                state = (inst.get("State") or {}).get("Name", "")
                m = self.machines.get(inst_id)
                if state == "running" and m is None:
                    self._boot(inst)
                elif state in GONE_STATES and m is not None:
                    self._vanish(m)
            for inst_id, m in self.machines.items():
                if inst_id not in seen:  # gone from moto altogether (a reset)
                    self._vanish(m)

    def _boot(self, inst: dict[str, Any]) -> None:
        inst_id, itype = inst["InstanceId"], inst.get("InstanceType", "")
        spot = inst.get("InstanceLifecycle") == "spot"
        tags = {t["Key"]: t.get("Value", "") for t in inst.get("Tags") or []}
        m = Machine(inst_id, itype, spot, slots_of_type(itype), tags=tags)
        self.machines[inst_id] = m
        if self._skip > 0:
            self._skip -= 1
            m.skipped = True
            log.info("cloud twin: %s boots without an agent", inst_id)
            return
        argv = [
            *pedl_command(),
            "agent",
            "run",
            "--id",
            inst_id,
            "--slots",
            str(m.slots),
            "--master",
            self.master_url,
            "--resource-pool",
            self.pool,
            "--work-dir",
            str(self.work_dir / f"agent-{inst_id}"),
        ]
        if spot and self.spot_watch:
            m.imds = FakeMetadataServer(ec2={"instance-id": inst_id, "instance-type": itype}).start()
            argv += ["--spot-watch", "--imds-url", m.imds.url]
        m.secret = self._user_data_secret(inst_id)
        token = m.secret or self.agent_token
        m.enrolled_with = "user data" if m.secret else "agent token" if token else ""
        env = {"PEDL_AGENT_TOKEN": token} if token else None
        m.agent = ManagedProcess(argv, self.work_dir / f"agent-{inst_id}.log", env=env).start()
        m.started_at = time.monotonic()
        log.info("cloud twin: %s is running; started its agent (pid %d)", inst_id, m.agent.pid)

    def _user_data_secret(self, inst_id: str) -> str | None:
        """The enrollment secret the instance's user data exports, as the boot script would hand it on."""
        try:
            attr = self.ec2.describe_instance_attribute(InstanceId=inst_id, Attribute="userData")
            script = base64.b64decode(attr["UserData"]["Value"]).decode()
        except Exception:  # no user data kept for it (moto's spot instances)
            return None
        found = re.search(r"^export PEDL_AGENT_TOKEN=(.+)$", script, re.MULTILINE)
        return shlex.split(found.group(1))[0] if found else None

    def _vanish(self, m: Machine) -> None:
        if m.gone_at is not None:
            return
        m.gone_at = time.monotonic()
        if m.agent is not None and m.agent.proc is not None:
            kill_tree(m.agent.pid)
            with contextlib.suppress(Exception):
                m.agent.proc.wait(5)
            with contextlib.suppress(Exception):
                m.agent._log.close()  # ManagedProcess keeps its log open while it runs
        if m.imds is not None:
            m.imds.stop()
        log.info("cloud twin: %s is gone; its agent was killed", m.instance_id)
