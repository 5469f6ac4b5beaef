"""One agent per work directory: a running agent holds an exclusive lock on <work dir>/agent.lock, so
a second agent with the same id (hence the same default work dir) on this host is refused."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

LOCK_NAME = "agent.lock"


class WorkDirError(Exception):
    """The agent cannot use its work directory (it cannot be created or opened)."""


class WorkDirInUse(WorkDirError):
    """Another live agent holds this work directory; the message says how to start this one."""


class WorkDirLock:
    """Held from lock_work_dir() until release() or the process ends (the kernel drops it then, so a
    crashed agent leaves no stale lock behind)."""

    def __init__(self, fd: int, path: Path) -> None:
        self.fd, self.path = fd, path

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # closing the only descriptor of the open file releases the flock
            self.fd = -1

    def __enter__(self) -> WorkDirLock:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()


def lock_work_dir(work_dir: Path, agent_id: str, *, default_work_dir: bool = False) -> WorkDirLock:
    """Take <work_dir>/agent.lock for this process, recording its pid and agent id there.

    Raises WorkDirInUse when another agent holds it, WorkDirError when it cannot be created.
    `default_work_dir` says the directory was derived from the id, so that another --id alone gives
    this agent a directory of its own."""
    path = work_dir / LOCK_NAME
    try:
        work_dir.mkdir(parents=True, exist_ok=True)
        # O_CLOEXEC: a task the agent starts must not inherit the lock and hold it after the agent is gone
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise WorkDirError(
            f"cannot use the work dir {work_dir}: {exc.strerror or exc}; choose another with --work-dir"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(fd)
        os.close(fd)
        raise WorkDirInUse(refusal(agent_id, work_dir, holder, default_work_dir)) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps({"pid": os.getpid(), "agent_id": agent_id}).encode(), 0)
    return WorkDirLock(fd, path)


def refusal(agent_id: str, work_dir: Path, holder: dict, default_work_dir: bool) -> str:
    pid = holder.get("pid", "unknown")
    other = holder.get("agent_id")
    if other is not None and other != agent_id:
        return (
            f"another agent (id {other}, pid {pid}) uses the work dir {work_dir}; "
            f"start this one with its own --work-dir"
        )
    how = "--id NAME" if default_work_dir else "--id NAME and its own --work-dir"
    return (
        f"another agent with id {agent_id} runs on this host (pid {pid}, work dir {work_dir}); "
        f"start this one with {how} (e.g. --id {agent_id}-2)"
    )


def _holder(fd: int) -> dict:
    """What the holding agent wrote: {} if it has not written yet or the file is not ours."""
    try:
        data = json.loads(os.pread(fd, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
