"""A TCP port nobody listens on right now, for local rendezvous, services and test servers.

The port is picked below the kernel's ephemeral range (net.ipv4.ip_local_port_range): a port the OS
hands out for binding to 0 is one it also hands out to outgoing connections, so between our pick and
the listener's bind any connection made on the machine may take it (EADDRINUSE: seen when a torch
rendezvous bound its port while tests beside it made HTTP requests). Below the range only another
listener can, and a random pick among ~20,000 ports makes that unlikely."""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10000  # above the well-known and most registered ports
TRIES = 50


def ephemeral_range(text: str | None = None) -> tuple[int, int]:
    """(first, last) of the kernel's ephemeral ports; Linux's default where the file is missing or odd."""
    try:
        raw = PORT_RANGE_FILE.read_text() if text is None else text
        first, last = (int(part) for part in raw.split())
    except (OSError, ValueError):
        return 32768, 60999
    return first, last


def free_port(host: str = "127.0.0.1", *, rng: random.Random | None = None, below: int | None = None) -> int:
    """`below`: where the ephemeral range starts (the kernel's, read each call; tests pass their own)."""
    pick = rng or random.SystemRandom()
    first = ephemeral_range()[0] if below is None else below
    if first - 1 > LOWEST:
        for _ in range(TRIES):
            port = pick.randint(LOWEST, first - 1)
            with socket.socket() as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                return port
    with socket.socket() as s:  # the range leaves no room below it, or every try was taken: the OS's pick
        s.bind((host, 0))
        return int(s.getsockname()[1])
