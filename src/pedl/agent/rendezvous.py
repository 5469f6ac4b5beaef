"""Whether this agent, as the chief node of a distributed trial, can serve its rendezvous port.

The master picks MASTER_PORT from `rendezvous_port_range` avoiding the ports of its own
allocations, but it cannot see other programs on the agent's host. The chief's agent checks before
it starts anything, so a busy port ends the run at once with a message that says so, instead of
torch failing after the context download and the import; the next run's search starts elsewhere
in the range (see pedl.master.cluster.rendezvous.pick_port).
"""

from __future__ import annotations

import contextlib
import errno
import socket
from collections.abc import Mapping


def rendezvous_port_problem(env: Mapping[str, str]) -> str | None:
    """Why the chief cannot listen on MASTER_PORT, or None (also None when this is not a chief
    of several nodes, or the variables are not there)."""
    try:
        is_chief = int(env.get("NODE_RANK", "")) == 0 and int(env.get("NNODES", "")) > 1
        port = int(env.get("MASTER_PORT", ""))
    except ValueError:
        return None
    if not is_chief:
        return None
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        # as torch's TCPStore binds it: every interface, TIME_WAIT leftovers do not count
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return (
                    f"rendezvous port {port} (MASTER_PORT) is in use on this agent by a program "
                    "outside pedl; the next run takes another port of rendezvous_port_range"
                )
            return f"cannot listen on rendezvous port {port} (MASTER_PORT): {exc.strerror or exc}"
    return None
