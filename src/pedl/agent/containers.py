"""Tasks in Docker containers: the `docker run` command line of a task, its image, and the cleanup.

The agent runs `docker run` attached, in the task's process group: the task's output streams
through the client as a process's would, SIGTERM to the group reaches the container (the client
proxies signals), and `docker kill` backs up a SIGKILL. Each container carries the labels
`pedl.agent-id` and `pedl.allocation-id` and is removed when its task ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pedl.agent import task_info
from pedl.common.agent_protocol import ContainerSpec

WORKDIR = "/run/determined/workdir"  # the model directory, as Determined mounts it


def mount_target(container_path: str, workdir: str = WORKDIR) -> str:
    """Where a bind mount goes in the task: an absolute container_path as it is, a relative one under the
    task's working directory (the config refuses one with '..')."""
    return container_path if container_path.startswith("/") else os.path.join(workdir, container_path)


AGENT_LABEL = "pedl.agent-id"
ALLOCATION_LABEL = "pedl.allocation-id"
# the agent's work dir: unique on a host (work_dir_lock.py), so two agents of one id (of two masters,
# or two test clusters) never take up each other's containers
WORK_DIR_LABEL = "pedl.work-dir"
DOCKER_TIMEOUT_S = 60.0
PULL_TIMEOUT_S = 1800.0


class ContainerError(Exception):
    """The container could not be prepared; the message is shown to the user."""


def container_name(allocation_id: str, agent_id: str) -> str:
    """The task's container on this agent: each agent of a trial spread over several, on one host and
    Docker daemon, runs a container of its own."""
    return f"pedl-{allocation_id}-{re.sub(r'[^A-Za-z0-9_.-]', '-', agent_id)}"


def docker_problem() -> str | None:
    """None when a Docker daemon answers this agent, else why not."""
    if shutil.which("docker") is None:
        return "the docker command is not installed"
    import subprocess

    try:
        done = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            text=True,
            timeout=DOCKER_TIMEOUT_S,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"docker info did not answer: {exc}"
    if done.returncode != 0:
        return (done.stderr.strip().splitlines() or ["docker info failed"])[-1]
    return None


def pick_image(spec: ContainerSpec, gpu: bool) -> str:
    image = spec.image_gpu if gpu else spec.image_cpu
    if not image:
        kind = "gpu" if gpu else "cpu"
        raise ContainerError(f"environment.image names no {kind} image, and this task got {kind} slots")
    return image


async def docker_command(
    *args: str, timeout: float | None = DOCKER_TIMEOUT_S, config_dir: str | None = None
) -> tuple[int, str]:
    """Run a docker command: (exit code, its output); None waits for as long as it takes."""
    argv = ["docker", *(["--config", config_dir] if config_dir else []), *args]
    proc = await asyncio.create_subprocess_exec(
        *argv, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return 124, f"docker {args[0]} took longer than {timeout:g} s"
    return proc.returncode or 0, out.decode(errors="replace").strip()


async def ensure_image(spec: ContainerSpec, image: str, progress: Callable[[str], None]) -> None:
    """The image is on this host, pulled when missing or when force_pull asks; a failure names the
    image and says what Docker said."""
    if not spec.force_pull:
        code, _ = await docker_command("image", "inspect", "--format", "{{.Id}}", image)
        if code == 0:
            return
    progress(f"pulling image {image}")
    with tempfile.TemporaryDirectory(prefix="pedl-docker-") as config_dir:
        if spec.registry_auth:
            server = spec.registry_auth.get("serveraddress") or _registry_of(image)
            entry = {k: v for k, v in spec.registry_auth.items() if k != "serveraddress"}
            Path(config_dir, "config.json").write_text(json.dumps({"auths": {server: entry}}))
            os.chmod(Path(config_dir, "config.json"), 0o600)
        code, out = await docker_command(
            "pull", image, timeout=PULL_TIMEOUT_S, config_dir=config_dir if spec.registry_auth else None
        )
    if code != 0:
        last = out.splitlines()[-1] if out else f"exit code {code}"
        raise ContainerError(f"cannot pull image {image!r}: {last}")


def _registry_of(image: str) -> str:
    first = image.split("/", 1)[0]
    return first if "/" in image and ("." in first or ":" in first or first == "localhost") else "docker.io"


def run_argv(
    *,
    spec: ContainerSpec,
    image: str,
    allocation_id: str,
    agent_id: str,
    task_dir: Path,
    info_dir: Path | None,
    env_file: Path,
    entrypoint: Sequence[str],
    gpu_devices: Sequence[str],
    shared_fs: Path | None,
    master_cert: Path | None,
    user: tuple[int, int] | None = None,
    accounts: Path | None = None,
    model_copy: Path | None = None,
) -> list[str]:
    """`docker run` for the task: attached, removed at exit, its files mounted, its GPUs passed;
    as `user` (uid, gid) when given, with `accounts` (a directory holding passwd and group) over
    the image's /etc/passwd and /etc/group, so the names resolve."""
    argv = [
        "docker",
        "run",
        "--rm",
        "--init",
        "--name",
        container_name(allocation_id, agent_id),
        "--label",
        f"{AGENT_LABEL}={agent_id}",
        "--label",
        f"{ALLOCATION_LABEL}={allocation_id}",
        "--label",
        f"{WORK_DIR_LABEL}={task_dir.parent.resolve()}",
        "--env-file",
        str(env_file),
        "--workdir",
        WORKDIR,
        "--network",
        spec.network_mode,
        "--shm-size",
        str(spec.shm_size_bytes),
        "--pull",
        "never",
        "-v",
        f"{task_dir}:{WORKDIR}",
    ]
    if info_dir is not None:
        argv += ["-v", f"{info_dir}:{task_info.INFO_DIR}:ro"]
    if model_copy is not None:
        argv += ["-v", f"{model_copy}:{task_info.MODEL_COPY_DIR}:ro"]
    if shared_fs is not None:
        # Determined's harness writes under /determined_shared_fs; pedl.core under the host path
        argv += ["-v", f"{shared_fs}:{task_info.SHARED_FS_DIR}", "-v", f"{shared_fs}:{shared_fs}"]
    if master_cert is not None:
        argv += ["-v", f"{master_cert}:{master_cert}:ro"]
    for mount in spec.bind_mounts:
        options = ["ro" if mount.get("read_only") else "rw", str(mount.get("propagation") or "rprivate")]
        argv += ["-v", f"{mount['host_path']}:{mount_target(mount['container_path'])}:{','.join(options)}"]
    if gpu_devices:
        argv += ["--gpus", f'"device={",".join(gpu_devices)}"']
    if user is not None:
        argv += ["--user", f"{user[0]}:{user[1]}"]
    if accounts is not None:
        argv += ["-v", f"{accounts / 'passwd'}:/etc/passwd:ro", "-v", f"{accounts / 'group'}:/etc/group:ro"]
    return [*argv, image, *entrypoint]


async def image_accounts(image: str, into: Path) -> tuple[str, str]:
    """The image's own /etc/passwd and /etc/group (copied out of a container created, never
    started, and removed); ContainerError says why not."""
    code, out = await docker_command("create", "--pull", "never", image, "/pedl-never-started")
    if code:
        raise ContainerError(f"docker create {image}: {out}")
    cid = out.splitlines()[-1].strip()
    try:
        texts = []
        for name in ("passwd", "group"):
            dest = into / f"image-{name}"
            code, out = await docker_command("cp", f"{cid}:/etc/{name}", str(dest))
            if code:
                raise ContainerError(f"docker cp {image}:/etc/{name}: {out}")
            texts.append(dest.read_text(errors="replace"))
            dest.unlink()
        return texts[0], texts[1]
    finally:
        await docker_command("rm", "-f", cid)


def write_env_file(path: Path, env: Mapping[str, str]) -> None:
    """Docker's --env-file (one NAME=VALUE a line, mode 0600: it holds the session token); a value
    with a newline cannot be passed this way and is refused naming the variable."""
    lines = []
    for name, value in env.items():
        if "\n" in value or "\n" in name or "=" in name:
            raise ContainerError(
                f"environment variable {name!r} cannot be passed to a container (a newline, or '=' in its name)"
            )
        lines.append(f"{name}={value}")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")


async def kill(name: str) -> None:
    await docker_command("kill", name)


async def remove(name: str) -> None:
    await docker_command("rm", "-f", name)
