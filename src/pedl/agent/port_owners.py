"""Which processes own a socket listening on a TCP port, from /proc (net/tcp{,6} and each process's fds);
the parsing and a task's family are pure, `family_listens` reads /proc."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

LISTEN = "0A"  # the state column of /proc/net/tcp for TCP_LISTEN


def listening_inodes(table: str, port: int) -> set[int]:
    """The inodes of the sockets listening on `port` in a /proc/net/tcp or /proc/net/tcp6 table."""
    out: set[int] = set()
    for line in table.splitlines()[1:]:  # the first line names the columns
        fields = line.split()
        if len(fields) < 10 or fields[3] != LISTEN:
            continue
        _, _, local_port = fields[1].rpartition(":")
        try:
            if int(local_port, 16) != port:
                continue
            inode = int(fields[9])
        except ValueError:
            continue
        if inode:
            out.add(inode)
    return out


def socket_inode(link: str) -> int | None:
    """The inode of a descriptor's link target `socket:[N]`; None for anything else."""
    if link.startswith("socket:[") and link.endswith("]"):
        inner = link[len("socket:[") : -1]
        return int(inner) if inner.isdigit() else None
    return None


def parent_and_session(stat: str) -> tuple[int, int] | None:
    """(ppid, session id) from the text of /proc/<pid>/stat; None when it does not parse. The command
    name (field 2) may hold spaces and parentheses, so the fields are counted after its last ')'."""
    _, _, rest = stat.rpartition(")")
    fields = rest.split()
    try:
        return int(fields[1]), int(fields[3])
    except (IndexError, ValueError):
        return None


def family(root: int, parents: Mapping[int, int], sessions: Mapping[int, int]) -> set[int]:
    """A task's processes: `root` (which leads a session of its own), its descendants, and every other
    process of its session (a daemon that left the tree but kept the session)."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = {root}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in out:
                out.add(child)
                todo.append(child)
    out |= {pid for pid, sid in sessions.items() if sid == root}
    return out


@dataclass(frozen=True)
class Ownership:
    owned: bool
    reason: str = ""  # why not, when not owned


def decide(port: int, listening: set[int], owned_sockets: Mapping[int, set[int]]) -> Ownership:
    """Whether one of the family's processes (`owned_sockets`: pid -> its socket inodes) holds a socket
    listening on `port` (`listening`: their inodes)."""
    if not listening:
        return Ownership(False, f"nothing listens on port {port}")
    if any(inodes & listening for inodes in owned_sockets.values()):
        return Ownership(True)
    return Ownership(False, f"port {port} is held by a process that is not the task's")


# -- reading /proc --------------------------------------------------------------------------------


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def process_table(proc: str = "/proc") -> tuple[dict[int, int], dict[int, int]]:
    """Every live process's parent and session: (pid -> ppid, pid -> sid)."""
    parents: dict[int, int] = {}
    sessions: dict[int, int] = {}
    for entry in os.listdir(proc):
        if not entry.isdigit():
            continue
        text = _read(f"{proc}/{entry}/stat")
        found = parent_and_session(text) if text is not None else None
        if found is not None:
            parents[int(entry)], sessions[int(entry)] = found
    return parents, sessions


def socket_inodes(pid: int, proc: str = "/proc") -> set[int]:
    """The sockets among a process's open descriptors (empty when it is gone or not ours to read)."""
    fd_dir = f"{proc}/{pid}/fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    out = set()
    for name in names:
        try:
            inode = socket_inode(os.readlink(f"{fd_dir}/{name}"))
        except OSError:
            continue
        if inode is not None:
            out.add(inode)
    return out


def family_listens(root: int, port: int, proc: str = "/proc") -> Ownership:
    """Whether a process of the task whose leader is `root` listens on `port`, in root's network namespace."""
    tables = [_read(f"{proc}/{root}/net/{name}") for name in ("tcp", "tcp6")]
    if all(t is None for t in tables):
        return Ownership(False, "the task's processes have ended")
    listening: set[int] = set()
    for table in tables:
        if table is not None:
            listening |= listening_inodes(table, port)
    if not listening:
        return decide(port, listening, {})
    parents, sessions = process_table(proc)
    return decide(port, listening, {pid: socket_inodes(pid, proc) for pid in family(root, parents, sessions)})
