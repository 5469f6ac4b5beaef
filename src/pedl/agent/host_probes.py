"""What this host lets tasks have, probed when the agent starts: mount namespaces of their own for
process tasks (Determined's fixed paths), and Docker for tasks that name an image."""

from __future__ import annotations

import asyncio
import logging

from pedl.agent import containers, task_info
from pedl.common import mount_namespace as task_namespace

log = logging.getLogger(__name__)


async def task_namespace_problem() -> str | None:
    """Why process tasks cannot have Determined's fixed paths to themselves (task_namespace.py); None
    when they can, their mountpoints made ready."""
    problem = await asyncio.to_thread(task_namespace.probe)
    if problem is None:
        try:
            await asyncio.to_thread(
                task_namespace.prepare_mountpoints, [task_info.INFO_DIR, task_info.SHARED_FS_DIR, containers.WORKDIR]
            )
        except OSError as exc:
            problem = f"cannot create {task_info.INFO_DIR} and {task_info.SHARED_FS_DIR}: {exc}"
    if problem is None:
        log.info(
            "process tasks get %s and %s in mount namespaces of their own", task_info.INFO_DIR, task_info.SHARED_FS_DIR
        )
    else:
        log.warning(
            "process tasks get no %s (%s): scripts on Determined's Core API will not find the "
            "cluster there; pedl.core scripts are unaffected",
            task_info.INFO_DIR,
            problem,
        )
    return problem


async def container_problem(wanted: str | None) -> str | None:
    """Why tasks that name an image cannot run here (`wanted`: the agent's --container-runtime); None
    when Docker answers. The master places such tasks only on agents that said so in `register`."""
    if wanted == "none":
        return "started with --container-runtime none"
    problem = await asyncio.to_thread(containers.docker_problem)
    if problem is not None and wanted == "docker":
        log.error("--container-runtime docker, but Docker does not answer: %s", problem)
    return problem
