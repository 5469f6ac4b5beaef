"""What a notebook's watcher counts as in use, for each of Determined's notebook_idle_type values."""

from __future__ import annotations

from pedl.launch.notebook_launcher import in_use

K_IDLE = {"id": "k1", "execution_state": "idle", "connections": 0, "last_activity": "2026-01-01T00:00:00.000000Z"}
K_BUSY = {**K_IDLE, "execution_state": "busy"}
K_CONNECTED = {**K_IDLE, "connections": 1}
TERM = {"name": "1", "last_activity": "2026-01-01T00:05:00.000000Z"}


def test_kernels_or_terminals_any_open_one_is_use() -> None:
    assert in_use("kernels_or_terminals", [], [], [], None) == (False, None)
    assert in_use("kernels_or_terminals", [K_IDLE], [], [], None)[0]
    assert in_use("kernels_or_terminals", [], [TERM], [], None)[0]
    assert in_use("kernels_or_terminals", [], [], [{"id": "s"}], None)[0]


def test_kernel_connections_only_a_connected_kernel_is_use() -> None:
    assert not in_use("kernel_connections", [K_IDLE], [TERM], [{"id": "s"}], None)[0]
    assert in_use("kernel_connections", [K_IDLE, K_CONNECTED], [], [], None)[0]


def test_activity_a_busy_kernel_or_new_activity_is_use() -> None:
    used, seen = in_use("activity", [K_IDLE], [TERM], [], None)
    assert used and seen == TERM["last_activity"]  # the first look: activity not seen before
    assert in_use("activity", [K_IDLE], [TERM], [], seen) == (False, seen)
    assert in_use("activity", [K_BUSY], [TERM], [], seen)[0]
    later = {**K_IDLE, "last_activity": "2026-01-01T00:06:00.000000Z"}
    assert in_use("activity", [later], [TERM], [], seen) == (True, later["last_activity"])
    # everything closed: nothing moved, so nothing is in use
    assert in_use("activity", [], [], [], seen) == (False, seen)
