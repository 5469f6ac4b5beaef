"""The host's view of a process task's PID namespace: its members by host pid, for tests that check a
task's processes are gone (a pid a task prints is its pid inside the namespace)."""

from __future__ import annotations

import os


def task_namespace(wrapper_pid: int) -> str:
    """The PID namespace the agent's child (the namespace wrapper, task_started's pid) made for the task."""
    return os.readlink(f"/proc/{wrapper_pid}/ns/pid_for_children")


def members(namespace: str) -> list[int]:
    """Host pids of the live (not zombie) processes in `namespace`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{name}/ns/pid") != namespace:
                continue
            with open(f"/proc/{name}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    continue
        except OSError:
            continue
        out.append(int(name))
    return out


def host_pid(namespace: str, pid_inside: int) -> int | None:
    """The host pid of the process whose pid in `namespace` is `pid_inside`."""
    for pid in members(namespace):
        try:
            with open(f"/proc/{pid}/status") as f:
                nspids = next(line for line in f if line.startswith("NSpid:")).split()[1:]
        except (OSError, StopIteration):
            continue
        if nspids and int(nspids[-1]) == pid_inside:
            return pid
    return None


def task_groups(agent_pid: int) -> list[int]:
    """The process groups of an agent's running tasks: each task's leader (its namespace's wrapper, or the
    task itself) is a child of the agent leading a group of its own."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as f:
                ppid, pgrp = (int(x) for x in f.read().rsplit(")", 1)[1].split()[1:3])
        except (OSError, ValueError):
            continue
        if ppid == agent_pid and pgrp == int(name):
            out.append(int(name))
    return out
