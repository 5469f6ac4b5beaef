"""The agent's answer to the master's `check_port`: whether a process of the task (a process task's
family, or a container's, found through `docker inspect`) listens on the port (port_owners.py)."""

from __future__ import annotations

import asyncio

from pedl.agent import containers, port_owners
from pedl.common.agent_protocol import CheckPort, PortChecked


async def task_root(container: str | None, pid: int | None) -> tuple[int | None, str]:
    """The pid whose family is the task's processes (its container's, when it runs in one), or None and why."""
    if container is not None:
        status, out = await containers.docker_command("inspect", "--format", "{{.State.Pid}}", container)
        root = int(out) if status == 0 and out.isdigit() else 0
        return (root, "") if root > 0 else (None, "the task's container is not running")
    if pid is None:
        return None, "the task's process has not started"
    return pid, ""


async def answer(msg: CheckPort, task: object | None) -> PortChecked:
    """`task`: the allocation's TaskRuntime or ReattachedContainer on this agent, None when it runs none."""

    def reply(owned: bool, reason: str = "") -> PortChecked:
        return PortChecked(
            request_id=msg.request_id, allocation_id=msg.allocation_id, port=msg.port, owned=owned, reason=reason
        )

    if task is None or getattr(task, "exited", False):
        return reply(False, "the task is not running on this agent")
    spec = getattr(task, "spec", None)
    in_container = spec is None or spec.container is not None  # a container taken up again has no spec
    root, why = await task_root(getattr(task, "container", None) if in_container else None, getattr(task, "pid", None))
    if root is None:
        return reply(False, why)
    found = await asyncio.to_thread(port_owners.family_listens, root, msg.port)
    return reply(found.owned, found.reason)
