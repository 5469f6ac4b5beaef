"""The init of a task's PID namespace and the wrapper the agent waits on, run here without namespaces (any
user may): the wrapper ends as the task ended (its code, or its signal), a signal to the wrapper's process
group reaches the task once and leaves the wrapper standing, and the task runs with default signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator

import pytest

from pedl.common.mount_namespace import probe, wrap
from pedl.devcluster import wait_for
from tests.support import task_processes

DRIVER = textwrap.dedent("""
    import sys
    from pedl.common import task_init
    task_init.run(lambda: task_init.Launch(sys.argv[1:], lambda: None),
                  lambda message: print("failed:", message, file=sys.stderr, flush=True))
""")


def wrapped(*argv: str) -> subprocess.Popen[str]:
    """The task under the init, in a session of its own as the agent starts it."""
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def py(code: str) -> list[str]:
    return [sys.executable, "-c", textwrap.dedent(code)]


def lines(proc: subprocess.Popen[str]) -> Iterator[str]:
    assert proc.stdout is not None
    for line in proc.stdout:
        yield line.rstrip("\n")


@pytest.mark.parametrize(
    ("script", "code"),
    [
        ("exit 3", 3),
        ("exit 0", 0),
        ("kill -TERM $$", -signal.SIGTERM),
        ("kill -SEGV $$", -signal.SIGSEGV),
        ("kill -KILL $$", -signal.SIGKILL),
    ],
)
def test_the_wrapper_ends_as_the_task_ended(script: str, code: int) -> None:
    proc = wrapped("sh", "-c", script)
    proc.communicate(timeout=60)
    assert proc.returncode == code


def test_a_signal_to_the_group_reaches_the_task_once_and_the_wrapper_reports_its_end() -> None:
    """The agent's kill is a killpg of the wrapper's group: the wrapper holds on (the task may take its
    time, checkpointing after a preemption), the init passes the signal to the task's own group."""
    proc = wrapped(
        *py("""
        import os, signal, sys, time
        seen = []
        def on(sig, _):
            seen.append(sig)
            print("term" if sig == signal.SIGTERM else "usr1", flush=True)
            if sig == signal.SIGUSR1:
                sys.exit(0 if seen.count(signal.SIGTERM) == 1 else 9)
        signal.signal(signal.SIGTERM, on)
        signal.signal(signal.SIGUSR1, on)
        print("ready", os.getpgrp() != os.getsid(0), flush=True)
        while True:
            time.sleep(0.05)
    """)
    )
    out = lines(proc)
    assert next(out) == "ready True"  # a process group of its own, not the wrapper's
    os.killpg(proc.pid, signal.SIGTERM)
    assert next(out) == "term"
    assert proc.poll() is None  # the wrapper did not end with the signal
    os.killpg(proc.pid, signal.SIGUSR1)
    assert next(out) == "usr1"
    assert proc.wait(timeout=60) == 0  # the task's own end, once it chose to end


def test_sigkill_to_the_group_ends_the_wrapper_with_it() -> None:
    proc = wrapped(*py("import time; print('ready', flush=True); time.sleep(600)"))
    assert next(lines(proc)) == "ready"
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL


def test_the_task_gets_default_signal_handling() -> None:
    """Python ignores SIGPIPE and SIGXFSZ, and an exec keeps a signal ignored (`yes | head` would spin on
    EPIPE); the init holds the forwarded signals blocked until the task exists."""
    proc = wrapped("grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    # the signals a process may set: glibc keeps 32 and 33 to itself, and what the test's own process inherited
    # for them (pytest-xdist's workers may have 32 ignored) is not the init's to change
    settable = sum(1 << (sig - 1) for sig in signal.valid_signals() if sig < 65)
    masks = {line.split()[0]: int(line.split()[1], 16) & settable for line in out.splitlines()}
    assert masks == {"SigBlk:": 0, "SigIgn:": 0}


def test_a_task_that_cannot_start_fails_with_its_reason() -> None:
    proc = wrapped("/nonexistent/program")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 127 and "cannot run '/nonexistent/program'" in err


# -- in a PID namespace of its own (root) --------------------------------------------------------------

PROBLEM = probe()
needs_namespaces = pytest.mark.skipif(PROBLEM is not None, reason=f"no namespaces here: {PROBLEM}")
NOBODY = (65534, 65534, [65534])


def in_namespace(argv: list[str], user: tuple[int, int, list[int]] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        wrap(argv, [], user=user), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


@needs_namespaces
def test_a_task_sees_only_its_own_processes_and_no_others_environ() -> None:
    """Bob's task read alice's task's /proc/<pid>/environ (her DET_USER_TOKEN) and the agent's command
    line: in its own PID namespace it sees neither."""
    other = subprocess.Popen(["sleep", "600"], env={"SECRET": "alices-token"})
    try:
        script = (
            f"echo $$; ls /proc | grep -E '^[0-9]+$' | tr '\\n' ' '; echo; "
            f"cat /proc/{other.pid}/environ 2>&1 || echo unreadable; "
            f"cat /proc/{os.getpid()}/cmdline 2>&1 || echo unreadable"
        )
        proc = in_namespace(["sh", "-c", script], user=NOBODY)
        out, err = proc.communicate(timeout=60)
    finally:
        other.kill()
        other.wait()
    assert proc.returncode == 0, err
    pid, listed, *rest = out.splitlines()
    assert pid != "1" and "1" in listed.split()  # the init is PID 1, the task is not
    assert max(int(p) for p in listed.split()) < 10 and str(other.pid) not in listed.split()
    assert "alices-token" not in out and rest.count("unreadable") == 2  # neither exists in its /proc


@needs_namespaces
def test_the_agents_sigterm_reaches_a_task_whose_init_is_pid_1() -> None:
    """PID 1 ignores a signal it has no handler for: the init passes SIGTERM on (preemption, kills)."""
    proc = in_namespace(py("import time; print('ready', flush=True); time.sleep(600)"))
    assert next(lines(proc)) == "ready"
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM


@needs_namespaces
def test_sigkill_to_the_group_ends_every_process_of_the_namespace() -> None:
    """Even one in a session of its own, which a killpg of the task's group alone would miss."""
    proc = in_namespace(["sh", "-c", "setsid sleep 600 & sleep 600 & echo ready; wait"])
    assert next(lines(proc)) == "ready"
    namespace = task_processes.task_namespace(proc.pid)
    assert len(task_processes.members(namespace)) == 4  # the init, sh and both sleeps
    os.killpg(proc.pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL
    wait_for(lambda: task_processes.members(namespace) == [], 60, what="the namespace's processes to end")


@needs_namespaces
def test_the_wrapper_ends_with_the_task_while_its_leftovers_linger_in_the_group() -> None:
    """As a task's group did: the agent hears the task's end at once, then lets what it left behind
    linger (the init stays in the wrapper's group while they live) and SIGKILLs the group."""
    proc = in_namespace(["sh", "-c", "sleep 600 & echo ready; exit 7"])
    assert next(lines(proc)) == "ready"
    namespace = task_processes.task_namespace(proc.pid)
    assert proc.wait(timeout=60) == 7
    assert len(task_processes.members(namespace)) == 2  # the init and the sleep
    os.killpg(proc.pid, signal.SIGKILL)  # the group lives on in the init
    wait_for(lambda: task_processes.members(namespace) == [], 60, what="the leftover to end")
