"""Fencing, the agent's half: when this agent has not heard from the master for longer than the
master's reconnect wait, the master has declared it lost and restarted its tasks elsewhere.

The master declares an agent lost `agent_heartbeat_timeout` + `agent_reconnect_wait` after its last
heartbeat at the earliest, so an agent that kills its tasks `agent_reconnect_wait` after it last
heard from the master is always first. Time is a monotonic clock, injected so tests can step it;
`time.monotonic` keeps counting while the process is stopped (SIGSTOP), which is what makes a
frozen agent see, once it runs again, how long it was away.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CHECK_INTERVAL_S = 0.5  # how often the agent looks at the clock, connected or not


class MasterContact:
    """When this agent last heard from the master, and whether its tasks must go."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self.reconnect_wait: float | None = None  # from `registered`; None (an older master): never fence
        self._last: float | None = None
        self._fenced = False  # the tasks of this silence have been killed already

    def heard(self) -> None:
        """A message or a pong arrived from the master (check `overdue` first: the silence that this
        ends may have been too long)."""
        self._last = self._monotonic()
        self._fenced = False

    def silence(self) -> float:
        """Seconds since the master was last heard (0 before the first registration)."""
        return 0.0 if self._last is None else self._monotonic() - self._last

    def overdue(self) -> bool:
        """The master has (or may have) given this agent's tasks away, and they are not yet fenced."""
        if self.reconnect_wait is None or self._last is None or self._fenced:
            return False
        return self.silence() > self.reconnect_wait

    def fenced(self) -> None:
        self._fenced = True
