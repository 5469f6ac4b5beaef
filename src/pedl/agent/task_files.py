"""A task's files on this agent that belong to its user: its directory, the clean copy of its model
definition, and a container's /etc/passwd and /etc/group with that user in them."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

from pedl.agent import containers, run_as
from pedl.agent.context import unpack_context
from pedl.common.agent_protocol import AgentUserGroup


def give_directory(directory: Path, uid: int, gid: int) -> None:
    """The task's directory and all in it to its user, and closed to every other (other users' tasks
    may enter the agent's work dir)."""
    run_as.give_tree(directory, uid, gid)
    os.chmod(directory, 0o700)


def model_copy(tgz: bytes, directory: Path, owner: AgentUserGroup | None) -> None:
    fresh_directory(directory)
    unpack_context(tgz, directory)
    if owner is not None and os.geteuid() == 0:
        run_as.give_tree(directory, owner.uid, owner.gid)


def fresh_directory(directory: Path) -> None:
    # a rerun of the same allocation id must not see the files of the last run
    if directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True)


async def container_accounts(
    image: str, group: AgentUserGroup, task_dir: Path, info_dir: Path, accounts: Path
) -> tuple[Path | None, str | None]:
    """For a container task run as `group`: its files given to that user (as root), and in `accounts`
    the image's account files with the user and group added (Determined adds them too). Returns the
    accounts directory, or None and why the names will not resolve."""
    if os.geteuid() == 0:
        await asyncio.to_thread(give_directory, task_dir, group.uid, group.gid)
        await asyncio.to_thread(run_as.give_tree, info_dir, group.uid, group.gid)
    try:
        await asyncio.to_thread(fresh_directory, accounts)
        passwd, groups = await containers.image_accounts(image, accounts)
        passwd, groups = run_as.passwd_lines(passwd, groups, group, containers.WORKDIR)
        (accounts / "passwd").write_text(passwd)
        (accounts / "group").write_text(groups)
        os.chmod(accounts, 0o755)
    except (OSError, containers.ContainerError) as exc:
        return None, (
            f"the container runs as uid {group.uid}, gid {group.gid}, but its /etc/passwd and "
            f"/etc/group could not name them {group.user!r} and {group.group!r}: {exc}"
        )
    return accounts, None
