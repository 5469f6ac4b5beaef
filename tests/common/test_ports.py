"""free_port picks below the kernel's ephemeral range, which outgoing connections draw from, so none of
them can take the port between the pick and the listener's bind; it falls back to the OS's pick."""

from __future__ import annotations

import random
import socket

import pytest

from pedl.common import ports


def test_the_port_is_below_the_ephemeral_range_and_free() -> None:
    first, last = ports.ephemeral_range()
    assert first <= last
    for seed in range(20):
        port = ports.free_port(rng=random.Random(seed))
        assert ports.LOWEST <= port < first
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # nothing listens on it


def test_a_taken_port_is_not_picked(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        monkeypatch.setattr(ports, "LOWEST", taken)  # the only port below the range is the one held
        got = ports.free_port(rng=random.Random(1), port_range=f"{taken + 1} 60999")
        assert got != taken  # every try found it taken, so the OS picked


def test_a_range_with_no_room_below_it_or_an_unreadable_one() -> None:
    port = ports.free_port(port_range=f"{ports.LOWEST} 60999")  # no room below: the OS's pick
    assert port >= ports.LOWEST
    assert ports.ephemeral_range("garbage") == (32768, 60999)
    assert ports.ephemeral_range("1024 65535") == (1024, 65535)
