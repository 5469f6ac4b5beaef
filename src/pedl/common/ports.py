"""A TCP port nobody listens on right now (the OS picks it), for local rendezvous and test servers."""

from __future__ import annotations

import socket


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
