"""The first process of a process task's PID namespace, and the wrapper outside it that the agent waits on:
the task sees only its own processes, the agent's signals reach it, and the agent reads its own end.

The wrapper (the agent's child, leader of the task's process group) unshares CLONE_NEWPID and forks the
init, which is PID 1 inside and stays in the wrapper's process group. The init prepares the task's view
(mounts, as root), forks the task into a process group of its own, passes on each signal in FORWARDED it
gets to that group, and reaps every orphan of the namespace. PID 1 ignores the signals it has no handler
for, so the task is never PID 1. The agent's killpg of the wrapper's group therefore reaches the wrapper
(which holds FORWARDED blocked and ignores them) and the init (which passes them on once), and SIGKILL ends
the init, which the kernel follows by killing every process of the namespace.

When the task ends, the init sends its wait status to the wrapper, which ends the same way: the task's
exit code, or killed by the same signal, so the agent's exit code stays negative for a signal. The init
stays while other processes of the namespace live (the agent lets them linger as it would a task's group,
then SIGKILLs the group); with none left it exits.
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import struct
import sys
from collections.abc import Callable
from typing import NoReturn

FORWARDED = (
    signal.SIGHUP,
    signal.SIGINT,
    signal.SIGQUIT,
    signal.SIGTERM,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)
# ignored by Python at start; an exec keeps an ignored signal ignored, so the task gets them back at default
RESTORED = (signal.SIGPIPE, signal.SIGXFSZ)
SETUP_FAILED = 126
STATUS = struct.Struct("=i")


class Launch:
    """What the init execs once the view is ready: `argv`, after `before_exec` in the task's process
    (dropping to the task's user, changing directory), which raises OSError or ValueError to fail it."""

    def __init__(self, argv: list[str], before_exec: Callable[[], None]) -> None:
        self.argv = argv
        self.before_exec = before_exec


def run(setup: Callable[[], Launch], fail: Callable[[str], None]) -> NoReturn:
    """In the wrapper, after unshare(CLONE_NEWPID): fork the init, which calls `setup` (the view, as root;
    it raises to fail the task, `fail` printing why) and runs the task; then end as the task ended."""
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # the init unblocks them once it can pass them on
    read_end, write_end = os.pipe()  # both close on exec: the task never holds them
    init = os.fork()
    if init == 0:
        os.close(read_end)
        os._exit(_init(setup, fail, write_end))
    os.close(write_end)
    _quiet()
    status = _read_status(read_end)
    if status is None:  # the init ended without a word (a setup that failed, or killed)
        _, status = os.waitpid(init, 0)
    end_like(status)


def end_like(status: int) -> NoReturn:
    """Exit as a process with wait status `status` did: its exit code, or killed by the same signal
    (no core file: the task's own, if any, is where it crashed)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(ValueError, OSError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal whose default is not to end a process
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else SETUP_FAILED)


def _read_status(fd: int) -> int | None:
    data = b""
    while len(data) < STATUS.size:
        chunk = os.read(fd, STATUS.size - len(data))
        if not chunk:
            return None
        data += chunk
    return STATUS.unpack(data)[0]


_task_group: int | None = None


def _forward(signum: int, _frame: object) -> None:
    if _task_group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(_task_group, signum)


def _init(setup: Callable[[], Launch], fail: Callable[[str], None], status_fd: int) -> int:
    """PID 1 of the namespace: returns its own exit code (the task's status went to `status_fd`)."""
    global _task_group
    for sig in FORWARDED:
        signal.signal(sig, _forward)  # still blocked: what arrives now waits for the task to exist
    try:
        launch = setup()
    except Exception as exc:  # every failure of the view fails the task, with its reason
        fail(str(exc))
        return SETUP_FAILED
    task = os.fork()
    if task == 0:
        _exec_task(launch, fail)
    with contextlib.suppress(OSError):  # the task does it too; whichever runs first
        os.setpgid(task, task)
    _task_group = task
    _quiet()
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            return 0
        if pid == task:
            with contextlib.suppress(OSError):
                os.write(status_fd, STATUS.pack(status))
                os.close(status_fd)


def _exec_task(launch: Launch, fail: Callable[[str], None]) -> NoReturn:
    """In the task's process: its own process group, default signal handling, then `launch`."""
    try:
        os.setpgid(0, 0)
        for sig in (*FORWARDED, *RESTORED):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, [])  # a signal sent meanwhile acts now, at default
        launch.before_exec()
    except Exception as exc:  # the task cannot start: its log says why
        fail(str(exc))
        os._exit(SETUP_FAILED)
    try:
        os.execvp(launch.argv[0], launch.argv)
    except OSError as exc:
        fail(f"cannot run {launch.argv[0]!r}: {exc.strerror or exc}")
    os._exit(127)


def _quiet() -> None:
    """Let go of the task's output pipes, so the agent reads their end when the task's processes end."""
    sys.stdout.flush()
    sys.stderr.flush()
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)
