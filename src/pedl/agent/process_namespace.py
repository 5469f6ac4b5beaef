"""A process task's Determined paths: its own /run/determined/info, /determined_shared_fs, model copy and
bind mounts in a mount namespace of its own (the argv that sets it up), or its log's lines on why not."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from pedl.agent import containers, run_as, task_info
from pedl.agent.task_env import TaskHost
from pedl.common import mount_namespace as task_namespace
from pedl.common.agent_protocol import AgentUserGroup, StartTask
from pedl.common.master_trust import DET_MASTER_CERT_ENV, MASTER_CERT_ENV

MASTER_CERT_FILE = "master-ca.pem"  # the CA the agent trusts the master with, among a process task's info files


class PopenUser(TypedDict, total=False):
    """Who a process task's process is spawned as, when the agent changes its user (Popen's arguments)."""

    user: int
    group: int
    extra_groups: list[int]


class TaskSetupError(Exception):
    """The task could not be started; the message is shown to the user."""


def namespace_argv(
    argv: list[str],
    env: dict[str, str],
    *,
    spec: StartTask,
    host: TaskHost,
    user: run_as.ProcessUser | None,
    group: AgentUserGroup | None,
    directory: Path,
    info_directory: Path,
    model_copy: Path,
    accounts_directory: Path,
    gpu_uuids: list[str],
    note: Callable[[str], None],
) -> tuple[list[str], PopenUser]:
    """Give the process its own /run/determined/info and /determined_shared_fs (a mount namespace of
    its own), or say in its log (`note`) why it cannot have them. Returns the argv to spawn, and the
    user Popen changes to where no namespace does it. `env` gets the paths as the task sees them."""
    shm = spec.shm_size_bytes
    try:
        shared = task_info.prepare_shared_fs(env)
    except OSError as exc:
        raise TaskSetupError(f"cannot create the checkpoint storage's host_path: {exc}") from exc
    storage = run_as.storage_note(shared, user.uid, user.groups) if user is not None and shared is not None else None
    if storage is not None:
        note(storage)
    if host.no_task_namespace is not None:
        note(
            f"no /run/determined/info for this task ({host.no_task_namespace}); a script on Determined's "
            "Core API will not find the cluster"
        )
        if shm is not None:
            note(
                f"resources.shm_size ({shm} bytes) not applied: the task shares the host's /dev/shm (a /dev/shm "
                "of its own needs a mount namespace)"
            )
        if spec.bind_mounts:
            note(
                "bind_mounts not applied (they need a mount namespace): "
                + ", ".join(f"{m['host_path']} -> {m['container_path']}" for m in spec.bind_mounts)
            )
        if user is not None:
            return argv, {"user": user.uid, "group": user.gid, "extra_groups": user.groups}
        return argv, {}
    if host.master_cert is not None:  # where the task's user reads it, whoever may enter the CA's directory
        env[MASTER_CERT_ENV] = env[DET_MASTER_CERT_ENV] = f"{task_info.INFO_DIR}/{MASTER_CERT_FILE}"
    files = task_info.info_files(env, gpu_uuids)
    try:
        task_info.write_info_dir(info_directory, files)
        if host.master_cert is not None:
            shutil.copyfile(host.master_cert, info_directory / MASTER_CERT_FILE)
        if user is not None:
            run_as.give_tree(info_directory, user.uid, user.gid)
    except OSError as exc:
        raise TaskSetupError(f"cannot write the task info files in {info_directory}: {exc}") from exc
    binds = [task_namespace.Bind(str(info_directory), task_info.INFO_DIR, read_only=True)]
    if model_copy.is_dir():
        binds.append(task_namespace.Bind(str(model_copy), task_info.MODEL_COPY_DIR, read_only=True))
    if shared is not None:
        binds.append(task_namespace.Bind(str(shared), task_info.SHARED_FS_DIR))
    binds += _mountpoints(spec, directory)
    # a bind mount over a system file (a sudoers, a PAM config) must not feed a setuid program: a task that
    # is not root gains no privileges by exec (no_new_privs), as Docker's containers may be run
    no_new_privs = bool(spec.bind_mounts) and user is not None
    task_dir, roots = str(directory), spec.bind_mount_roots
    if user is None:
        return task_namespace.wrap(argv, binds, shm_size=shm, task_dir=task_dir, allowed_roots=roots), {}
    binds.append(task_namespace.Bind(str(directory), containers.WORKDIR))
    env["PWD"] = containers.WORKDIR
    if group is not None:  # the user's names, as a container of the task would show them
        try:
            accounts = run_as.account_files(group, user.env["HOME"], accounts_directory)
        except OSError as exc:
            raise TaskSetupError(f"cannot write the task's /etc/passwd and /etc/group: {exc}") from exc
        if accounts is not None:
            binds += [
                task_namespace.Bind(str(accounts[0]), "/etc/passwd", read_only=True),
                task_namespace.Bind(str(accounts[1]), "/etc/group", read_only=True),
            ]
    return task_namespace.wrap(
        argv,
        binds,
        user=(user.uid, user.gid, user.groups),
        chdir=containers.WORKDIR,
        shm_size=shm,
        no_new_privs=no_new_privs,
        task_dir=task_dir,
        allowed_roots=roots,
    ), {}


def _mountpoints(spec: StartTask, directory: Path) -> list[task_namespace.Bind]:
    """The task's bind mounts as namespace binds: an absolute container_path as it is, a relative one in
    the task's directory. The namespace opens each host_path with the task user's permissions (one it
    may not read fails the task, naming it; one that does not exist is left out, and the task's log says
    so) and makes a missing mountpoint in the task's view only, never on the host."""
    return [
        task_namespace.Bind(
            str(mount["host_path"]),
            containers.mount_target(mount["container_path"], str(directory)),
            read_only=bool(mount.get("read_only")),
            as_user=True,
        )
        for mount in spec.bind_mounts
    ]
