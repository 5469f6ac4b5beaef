"""Which processes own a listening port: the pure parsing and decisions on made-up /proc text, then
`family_listens` on this host's /proc with real sockets of a real process family."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.agent import port_owners
from pedl.agent.port_owners import Ownership, decide, family, listening_inodes, parent_and_session, socket_inode

HEADER = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
TCP = HEADER + (
    "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 111 1 0 100 0\n"
    "   1: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0\n"
    "   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 333 1 0 20 4\n"
    "   3: 0100007F:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 444 1 0 100 0\n"
    "   4: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 0 1 0 100 0\n"
    "   garbage line\n"
)
TCP6 = HEADER + (
    "   0: 00000000000000000000000000000000:1F90 00000000000000000000000000000000:0000 0A 00000000:00000000 "
    "00:00000000 00000000  1000        0 555 1 0 100 0\n"
)


def test_listening_inodes_are_those_in_listen_state_on_the_port() -> None:
    assert listening_inodes(TCP, 8080) == {111, 222}  # not the established connection (333)
    assert listening_inodes(TCP, 22) == {444}
    assert listening_inodes(TCP, 8081) == set()  # inode 0: a socket being torn down
    assert listening_inodes(TCP6, 8080) == {555}
    assert listening_inodes("", 8080) == set()


def test_socket_inodes_and_stat_fields_parse() -> None:
    assert socket_inode("socket:[12345]") == 12345
    assert socket_inode("pipe:[12345]") is None and socket_inode("/dev/null") is None
    assert socket_inode("socket:[x]") is None
    # the command name may hold spaces and parentheses
    stat = "4242 (a (weird) name) S 4200 4242 4100 0 -1 4194560 0 0 0 0"
    assert parent_and_session(stat) == (4200, 4100)
    assert parent_and_session("garbage") is None


def test_a_tasks_family_is_its_tree_and_its_session() -> None:
    parents = {100: 1, 101: 100, 102: 101, 200: 1, 201: 200, 300: 1}
    sessions = {100: 100, 101: 100, 102: 555, 200: 200, 201: 200, 300: 100}
    # 102 left the session but is a descendant; 300 left the tree (a daemon) but kept the session
    assert family(100, parents, sessions) == {100, 101, 102, 300}
    assert family(200, parents, sessions) == {200, 201}


def test_decide() -> None:
    assert decide(8080, {111}, {100: {7, 111}}) == Ownership(True)
    assert decide(8080, {111}, {100: {7}}) == Ownership(False, "port 8080 is held by a process that is not the task's")
    assert decide(8080, set(), {100: {7}}) == Ownership(False, "nothing listens on port 8080")


@pytest.mark.skipif(not Path("/proc/self/net/tcp").exists(), reason="needs Linux's /proc")
def test_family_listens_on_real_processes() -> None:
    """A task (its own session) whose grandchild listens owns the port; a process outside its family that
    listens on another port does not make that port the task's."""
    grandchild = (
        "import socket, time; s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); "
        "print(s.getsockname()[1], flush=True); time.sleep(600)"
    )
    code = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {grandchild!r}])"
    task = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, start_new_session=True)
    outsider = socket.socket()
    outsider.bind(("127.0.0.1", 0))
    outsider.listen()
    try:
        assert task.stdout is not None
        port = int(task.stdout.readline())
        assert port_owners.family_listens(task.pid, port) == Ownership(True)
        other = outsider.getsockname()[1]
        found = port_owners.family_listens(task.pid, other)
        assert not found.owned and "not the task's" in found.reason
        free = socket.socket()
        free.bind(("127.0.0.1", 0))
        unused = free.getsockname()[1]
        free.close()
        assert port_owners.family_listens(task.pid, unused) == Ownership(False, f"nothing listens on port {unused}")
    finally:
        os.killpg(task.pid, 9)
        task.wait()
        outsider.close()
    assert not port_owners.family_listens(task.pid, port).owned  # the task is gone
