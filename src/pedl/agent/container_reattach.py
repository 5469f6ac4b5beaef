"""Containers an agent finds at start that an earlier run of it started: the agent was killed, the
containers were not. A running one is taken up again (its output followed from now, its exit
reported, kill honoured), so a trial whose agent restarts within the master's reconnect wait goes on
where it is; one that ended while the agent was away has its exit reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel

from pedl.agent import containers
from pedl.agent.task_logs import LogBatcher, pump_lines
from pedl.agent.task_runtime import INFO_ROOT
from pedl.common.agent_protocol import TaskExited

log = logging.getLogger(__name__)

READER_DRAIN_S = 5.0


@dataclass(frozen=True)
class FoundContainer:
    name: str
    allocation_id: str
    running: bool
    exit_code: int | None


async def find(agent_id: str, work_dir: Path) -> list[FoundContainer]:
    """The containers this agent (its id and work dir) started, running or ended."""
    code, out = await containers.docker_command(
        "ps",
        "-aq",
        "--filter",
        f"label={containers.AGENT_LABEL}={agent_id}",
        "--filter",
        f"label={containers.WORK_DIR_LABEL}={work_dir.resolve()}",
    )
    ids = out.split() if code == 0 else []
    if not ids:
        return []
    code, out = await containers.docker_command("inspect", *ids)
    if code != 0:
        return []
    found = []
    for item in json.loads(out or "[]"):
        labels = (item.get("Config") or {}).get("Labels") or {}
        state = item.get("State") or {}
        allocation_id = labels.get(containers.ALLOCATION_LABEL)
        if allocation_id:
            found.append(
                FoundContainer(
                    name=str(item.get("Name", "")).lstrip("/"),
                    allocation_id=allocation_id,
                    running=bool(state.get("Running")),
                    exit_code=state.get("ExitCode"),
                )
            )
    return found


async def take_up(
    agent_id: str, work_dir: Path, send: Callable[[BaseModel], None], start: Callable[[ReattachedContainer], None]
) -> None:
    """The containers an earlier run of this agent started: each running one is handed to `start` as
    it is found, to go on as this run's task; those that ended meanwhile are removed and have their
    exit reported (the master ignores what it no longer holds)."""
    for found in await find(agent_id, work_dir):
        if found.running:
            start(ReattachedContainer(found, work_dir, send))
            log.warning(
                "agent %s: took up container %s (allocation %s) again", agent_id, found.name, found.allocation_id
            )
        else:
            await containers.remove(found.name)
            why = "" if found.exit_code is not None else "ended while the agent was away"
            send(TaskExited(allocation_id=found.allocation_id, exit_code=found.exit_code, reason=why))
            log.warning(
                "agent %s: container %s (allocation %s) ended with %s while the agent was away",
                agent_id,
                found.name,
                found.allocation_id,
                found.exit_code,
            )


class ReattachedContainer:
    """A running container taken up again; the agent treats it as it treats a TaskRuntime."""

    def __init__(self, found: FoundContainer, work_dir: Path, send: Callable[[BaseModel], None]) -> None:
        self.allocation_id = found.allocation_id
        self.container = found.name
        self._work_dir = work_dir
        self._send = send
        self._logs = LogBatcher(found.allocation_id, send)
        self._kill_reason = ""
        self._stopper: asyncio.Task[tuple[int, str]] | None = None
        self.exited = False
        self.pid: int | None = None

    async def run(self) -> int | None:
        since = f"{time.time():.3f}"
        follow = await asyncio.create_subprocess_exec(
            "docker",
            "logs",
            "--follow",
            "--since",
            since,
            self.container,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert follow.stdout is not None and follow.stderr is not None
        readers = [
            asyncio.create_task(pump_lines(follow.stdout, lambda line: self._logs.add("stdout", line))),
            asyncio.create_task(pump_lines(follow.stderr, lambda line: self._logs.add("stderr", line))),
        ]
        self._logs.add(
            "agent",
            f"pedl agent: took up container {self.container} again after an agent restart "
            f"(its output while the agent was away is in `docker logs {self.container}`)",
        )
        code: int | None
        try:
            status, out = await containers.docker_command("wait", self.container, timeout=None)
            code = (
                int(out.split()[-1]) if status == 0 and out.split() and out.split()[-1].lstrip("-").isdigit() else None
            )
        finally:
            _, pending = await asyncio.wait(readers, timeout=READER_DRAIN_S)
            for reader in pending:
                reader.cancel()
            with contextlib.suppress(ProcessLookupError):
                follow.kill()
            await follow.wait()
        await containers.remove(self.container)
        self.finish(code, self._kill_reason or ("" if code is not None else "the container vanished"))
        return code

    def kill(self, grace_period: float, reason: str = "") -> None:
        """SIGTERM now, SIGKILL after the grace period (docker stop)."""
        if self.exited or self._stopper is not None:
            return
        self._kill_reason = reason or "killed"
        self._stopper = asyncio.ensure_future(
            containers.docker_command(
                "stop", "--time", str(max(int(grace_period), 0)), self.container, timeout=grace_period + 60
            )
        )

    def finish(self, code: int | None, reason: str) -> None:
        self._logs.flush()
        self.exited = True
        # what the task's first runtime would have removed at its exit (task_runtime.py)
        shutil.rmtree(self._work_dir / INFO_ROOT / self.allocation_id, ignore_errors=True)
        shutil.rmtree(self._work_dir / INFO_ROOT / f"{self.allocation_id}.model", ignore_errors=True)
        (self._work_dir / INFO_ROOT / f"{self.allocation_id}.env").unlink(missing_ok=True)
        self._send(TaskExited(allocation_id=self.allocation_id, exit_code=code, reason=reason))
