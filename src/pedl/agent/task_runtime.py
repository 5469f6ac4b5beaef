"""One task on this agent: prepare its directory, run its process group, ship its output.

Every task ends with exactly one `task_exited`, whether its process ran or it failed before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from pedl.agent import containers, run_as, task_files, task_info
from pedl.agent.context import ContextError, fetch_context, unpack_context
from pedl.agent.process_namespace import PopenUser, TaskSetupError, namespace_argv
from pedl.agent.rendezvous import rendezvous_port_problem
from pedl.agent.task_env import CONTEXT_HOOK, TaskHost, task_argv, task_env
from pedl.agent.task_logs import LogBatcher, pump_lines
from pedl.common.agent_protocol import StartTask, TaskExited, TaskStarted
from pedl.common.task_mounts import root_problem

log = logging.getLogger(__name__)

LEFTOVER_WAIT_S = 1.0  # after the main process exits, how long the rest of its group may linger
READER_DRAIN_S = 5.0  # output pipes held open by processes outside the group are abandoned then
POLL_S = 0.05
TASK_TMP = ".tmp"  # in a task's directory: its TMPDIR, when it runs as a user of its own
INFO_ROOT = ".det-info"  # under the work dir: each task's Determined info files, in a directory of its own

Send = Callable[[BaseModel], None]


class AgentTask(Protocol):
    """What the agent holds of a task it runs: a TaskRuntime, or a container taken up again after an agent
    restart (container_reattach.ReattachedContainer)."""

    @property
    def allocation_id(self) -> str: ...

    @property
    def exited(self) -> bool: ...  # its exit has been handed to the master's outbox

    async def run(self) -> int | None: ...

    def kill(self, grace_period: float, reason: str = "") -> None: ...


class TaskRuntime:
    """Runs one `start_task`; `send` receives its task_started / task_logs / task_exited."""

    def __init__(self, spec: StartTask, host: TaskHost, send: Send) -> None:
        self.spec = spec
        self._host = host
        self._send = send
        self._logs = LogBatcher(spec.allocation_id, send)
        self._proc: asyncio.subprocess.Process | None = None
        self._kill_requested = asyncio.Event()
        self._kill_reason = ""
        self._kill_deadline: float | None = None  # monotonic time of the SIGKILL
        self._escalations: set[asyncio.Task[None]] = set()
        self.exited = False  # task_exited has been handed to `send`
        self._user: run_as.ProcessUser | None = None  # a process task's user, when the agent changes it
        self._run_as = spec.run_as  # who the task runs as on this agent (run_as.effective), set by _prepare
        self._popen_user: PopenUser = {}  # Popen's user/group/extra_groups, when not wrapped

    @property
    def allocation_id(self) -> str:
        return self.spec.allocation_id

    @property
    def container(self) -> str:
        """The name of the task's container, when it runs in one."""
        return containers.container_name(self.spec.allocation_id, self._host.agent_id)

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def directory(self) -> Path:
        return self._host.work_dir / self.allocation_id

    async def run(self) -> int | None:
        """The task's whole life; returns its exit code (None when it never started)."""
        try:
            return await self._run()
        except asyncio.CancelledError:
            # the agent is going down without waiting; leave no process behind
            self._signal_group(signal.SIGKILL)
            raise
        finally:
            for escalation in self._escalations:
                escalation.cancel()

    def kill(self, grace_period: float, reason: str = "") -> None:
        """SIGTERM to the task's process group now, SIGKILL after `grace_period` seconds."""
        if self.exited:
            return
        if not self._kill_requested.is_set():
            self._kill_reason = reason or "killed"
            self._kill_requested.set()
        deadline = time.monotonic() + max(grace_period, 0.0)
        if self._kill_deadline is None or deadline < self._kill_deadline:
            self._kill_deadline = deadline
        if self._proc is not None:
            self._terminate()
        # before the process exists, _run sees the request and stops its preparation

    async def _run(self) -> int | None:
        prepare = asyncio.create_task(self._prepare())
        killed = asyncio.create_task(self._kill_requested.wait())
        await asyncio.wait({prepare, killed}, return_when=asyncio.FIRST_COMPLETED)
        killed.cancel()
        if self._kill_requested.is_set():
            prepare.cancel()
            await asyncio.wait({prepare})
            return self._fail(f"killed before it started ({self._kill_reason})")
        try:
            argv, env = prepare.result()
        except (ContextError, TaskSetupError) as exc:
            return self._fail(str(exc))
        except Exception as exc:  # a bug here must still end the task for the master
            log.exception("preparing task %s failed", self.allocation_id)
            return self._fail(f"internal agent error: {exc!r}")
        try:
            self._proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=self.directory,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                **self._popen_user,
            )
        except OSError as exc:
            return self._fail(f"cannot run {argv[0]!r}: {exc.strerror or exc}")
        self._send(TaskStarted(allocation_id=self.allocation_id, pid=self._proc.pid))
        log.info("task %s started (pid %d): %s", self.allocation_id, self._proc.pid, argv)
        if self._kill_requested.is_set():  # killed while the process was being spawned
            self._terminate()
        return await self._supervise(self._proc)

    @property
    def info_directory(self) -> Path:
        """Determined's task info files of this task on the host (task_info.py)."""
        return self._host.work_dir / INFO_ROOT / self.allocation_id

    @property
    def model_copy(self) -> Path:
        """A trial's clean copy of its model definition (task_info.MODEL_COPY_DIR)."""
        return task_info.model_copy_directory(self.info_directory)

    @property
    def env_file(self) -> Path:
        """A container task's variables, for docker run's --env-file (they hold its session token)."""
        return self._host.work_dir / INFO_ROOT / f"{self.allocation_id}.env"

    async def _prepare(self) -> tuple[list[str], dict[str, str]]:
        argv = task_argv(self.spec.entrypoint, self.spec.startup_hook)
        if not argv:
            raise TaskSetupError("the entrypoint is empty")
        directory = self.directory
        if directory.resolve().parent != self._host.work_dir.resolve():
            raise TaskSetupError(f"allocation id {self.allocation_id!r} is not a plain name")
        busy = rendezvous_port_problem(self.spec.env)
        if busy:
            raise TaskSetupError(busy)
        self._run_as = run_as.effective(self.spec.run_as, os.geteuid())
        if self.spec.container is None:  # Docker changes a container's user whoever the agent is
            refused = run_as.refusal(self._run_as, self._host.agent_id, os.geteuid(), os.getegid())
            if refused:
                raise TaskSetupError(refused)
        try:
            await asyncio.to_thread(task_files.fresh_directory, directory)
        except OSError as exc:
            raise TaskSetupError(f"cannot create the task directory {directory}: {exc}") from exc
        tgz = await fetch_context(
            self.spec.context_url, self.spec.session_token, self._host.ssl_context, self._host.master_cert
        )
        await asyncio.to_thread(unpack_context, tgz, directory)
        if self.spec.env.get("DET_TRIAL_ID"):
            await asyncio.to_thread(task_files.model_copy, tgz, self.model_copy, self._run_as)
        argv = task_argv(self.spec.entrypoint, self.spec.startup_hook, (directory / CONTEXT_HOOK).is_file())
        if self.spec.container is not None:
            return await self._container(argv)
        env = task_env(self.spec, self._host, gpu=self._gpu)
        if self._run_as is not None and os.geteuid() == 0:
            # in its namespace the task works in its directory at Determined's /run/determined/workdir,
            # which the user reaches whoever may enter the agent's work dir (a root agent's is in /root)
            home = Path(containers.WORKDIR) if self._host.no_task_namespace is None else directory
            self._user = run_as.process_user(self._run_as, home, names_shown=self._host.no_task_namespace is None)
            env.update(self._user.env)
            if "TMPDIR" not in self.spec.env:
                # a temporary directory of the task's own: in a shared /tmp the first user's task makes the
                # directories others' tasks then cannot write (TensorBoard's /tmp/.tensorboard-info), and
                # their files are there for every user to find
                await asyncio.to_thread((directory / TASK_TMP).mkdir, mode=0o700, exist_ok=True)
                env["TMPDIR"] = str(home / TASK_TMP)
            blocked = (
                None
                if self._host.no_task_namespace is None
                else run_as.blocked_at(directory, self._user.uid, self._user.groups)
            )
            notes = (
                [*self._user.notes]
                if blocked is None
                else [
                    *self._user.notes,
                    (
                        f"uid {self._user.uid} cannot enter {blocked}, so the task reaches its directory "
                        f"{directory} (HOME={self._user.env['HOME']}) only by relative paths; give the agent a "
                        "--work-dir every user can enter, or run it where it can have mount namespaces"
                    ),
                ]
            )
            for note in notes:
                self._logs.add("agent", f"pedl agent {self._host.agent_id}: {note}")
            await asyncio.to_thread(task_files.give_directory, directory, self._user.uid, self._user.gid)
        else:
            os.chmod(directory, 0o700)
        # a few small files: no thread needed
        argv, self._popen_user = namespace_argv(
            argv,
            env,
            spec=self.spec,
            host=self._host,
            user=self._user,
            group=self._run_as,
            directory=directory,
            info_directory=self.info_directory,
            model_copy=self.model_copy,
            accounts_directory=self.accounts_directory,
            gpu_uuids=self._gpu_uuids(),
            note=lambda text: self._logs.add("agent", f"pedl agent {self._host.agent_id}: {text}"),
        )
        return argv, env

    @property
    def _gpu(self) -> bool:
        return any(
            self._host.slots.get(s) is not None and self._host.slots[s].type == "cuda" for s in self.spec.slot_ids
        )

    async def _container(self, entrypoint: list[str]) -> tuple[list[str], dict[str, str]]:
        """`docker run` of the task in its image: the container gets the task's variables (not the
        agent's own), its model directory, its info files and its storage; the client gets the
        agent's environment."""
        spec = self.spec.container
        assert spec is not None
        if self._host.no_containers is not None:
            raise TaskSetupError(
                f"this task names an image ({spec.image_gpu if self._gpu else spec.image_cpu}) "
                f"but agent {self._host.agent_id} cannot run containers: {self._host.no_containers}"
            )
        for i, mount in enumerate(spec.bind_mounts):  # the daemon mounts as root: only the allowed roots bound it
            refused = root_problem(os.path.realpath(mount["host_path"]), self.spec.bind_mount_roots)
            if refused:
                raise TaskSetupError(f"bind_mounts[{i}].host_path {mount['host_path']} {refused}")
        try:
            image = containers.pick_image(spec, self._gpu)
            await containers.ensure_image(spec, image, lambda line: self._logs.add("agent", line))
            env = task_env(self.spec, self._host, base={}, gpu=self._gpu)
            if "PATH" not in self.spec.env:
                env.pop("PATH", None)  # the image's own
            env.pop("CUDA_VISIBLE_DEVICES", None)  # the container sees only its GPUs, numbered from 0
            files = task_info.info_files(env, self._gpu_uuids())
            task_info.write_info_dir(self.info_directory, files)
            env_file = self.env_file
            containers.write_env_file(env_file, env)
            shared = task_info.prepare_shared_fs(env)
        except containers.ContainerError as exc:
            raise TaskSetupError(str(exc)) from exc
        except OSError as exc:
            raise TaskSetupError(f"cannot prepare the container's files: {exc}") from exc
        # by NVML index (the slot id), the numbering the NVIDIA container runtime uses too
        cuda = [self._host.slots[s] for s in self.spec.slot_ids if self._gpu and s in self._host.slots]
        user, accounts = await self._container_user(image)
        argv = containers.run_argv(
            spec=spec,
            image=image,
            allocation_id=self.allocation_id,
            agent_id=self._host.agent_id,
            task_dir=self.directory,
            info_dir=self.info_directory,
            env_file=env_file,
            entrypoint=entrypoint,
            gpu_devices=[slot.id for slot in cuda],
            shared_fs=shared,
            master_cert=self._host.master_cert,
            user=user,
            accounts=accounts,
            model_copy=self.model_copy if self.model_copy.is_dir() else None,
        )
        self._logs.add(
            "agent", f"pedl agent {self._host.agent_id}: running in container {self.container} of image {image}"
        )
        return argv, dict(os.environ)

    @property
    def accounts_directory(self) -> Path:
        """A container task's /etc/passwd and /etc/group, with its user and group added."""
        return self._host.work_dir / INFO_ROOT / f"{self.allocation_id}.etc"

    async def _container_user(self, image: str) -> tuple[tuple[int, int] | None, Path | None]:
        """`--user uid:gid` and the account files for a task that runs as its owner's agent user group
        (task_files.container_accounts); without the files it runs all the same, its log saying why."""
        group = self._run_as
        if group is None:
            return None, None
        accounts, problem = await task_files.container_accounts(
            image, group, self.directory, self.info_directory, self.accounts_directory
        )
        if problem is not None:
            self._logs.add("agent", f"pedl agent {self._host.agent_id}: {problem}")
        return (group.uid, group.gid), accounts

    def _gpu_uuids(self) -> list[str]:
        slots = [self._host.slots.get(s) for s in self.spec.slot_ids]
        return [slot.uuid for slot in slots if slot is not None and slot.type == "cuda" and slot.uuid]

    async def _supervise(self, proc: asyncio.subprocess.Process) -> int:
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            asyncio.create_task(pump_lines(proc.stdout, lambda line: self._logs.add("stdout", line))),
            asyncio.create_task(pump_lines(proc.stderr, lambda line: self._logs.add("stderr", line))),
        ]
        code = await proc.wait()
        # the rest of the group (workers, a shell's children) may finish within the grace period
        # of a kill, or a moment otherwise; then it goes, so no orphan keeps the task's slots
        linger_until = time.monotonic() + LEFTOVER_WAIT_S
        if self._kill_deadline is not None:
            linger_until = max(linger_until, self._kill_deadline)
        while self._group_alive() and time.monotonic() < linger_until:
            await asyncio.sleep(POLL_S)
        self._signal_group(signal.SIGKILL)
        _, pending = await asyncio.wait(readers, timeout=READER_DRAIN_S)
        for reader in pending:
            reader.cancel()
        reason = self._kill_reason if self._kill_requested.is_set() else ""
        if self.spec.container is not None:
            await containers.remove(self.container)  # --rm misses it when the client was killed
        self._exit(code, reason)
        log.info("task %s exited with %s %s", self.allocation_id, code, reason)
        return code

    def _terminate(self) -> None:
        assert self._proc is not None
        if self._proc.returncode is not None:
            return
        self._signal_group(signal.SIGTERM)
        escalation = asyncio.create_task(self._escalate())
        self._escalations.add(escalation)
        escalation.add_done_callback(self._escalations.discard)

    async def _escalate(self) -> None:
        assert self._proc is not None and self._kill_deadline is not None
        await asyncio.sleep(max(self._kill_deadline - time.monotonic(), 0.0))
        # the leader may be gone (a shell that ended on SIGTERM) while the rest of its group holds on, and
        # with it the output pipes the agent waits to see closed
        if self._proc.returncode is None or self._group_alive():
            log.info("task %s outlived its grace period; sending SIGKILL", self.allocation_id)
            self._signal_group(signal.SIGKILL)

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._proc is None:
            return
        if sig == signal.SIGKILL and self.spec.container is not None:
            # the client does not pass SIGKILL on: the daemon must end the container itself
            self._escalations.add(asyncio.ensure_future(containers.kill(self.container)))
        # the group id is the leader's pid (new session); a group that is gone needs nothing
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, sig)

    def _group_alive(self) -> bool:
        if self._proc is None:
            return False
        try:
            os.killpg(self._proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    def _fail(self, reason: str) -> None:
        log.warning("task %s failed to start: %s", self.allocation_id, reason)
        self._logs.add("agent", f"pedl agent {self._host.agent_id}: task failed to start: {reason}")
        self._exit(None, reason)

    def _exit(self, code: int | None, reason: str) -> None:
        shutil.rmtree(self.info_directory, ignore_errors=True)  # it holds the task's session token
        shutil.rmtree(self.model_copy, ignore_errors=True)
        if "/" not in self.allocation_id and self.allocation_id not in (".", ".."):
            self.env_file.unlink(missing_ok=True)  # so does the container's env file
            shutil.rmtree(self.accounts_directory, ignore_errors=True)
        self._logs.flush()
        self.exited = True
        self._send(TaskExited(allocation_id=self.allocation_id, exit_code=code, reason=reason))
