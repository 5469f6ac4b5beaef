"""Failed logins per (user name, client address) and per address. Past a bound a login answers 429 with
Retry-After, before the password is checked, so guessing costs the guesser time and the master no
argon2 work; a guesser elsewhere can delay a user's logins from its own address only, never lock them out."""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from pedl.config.security_config import LoginRateLimit
from pedl.errors import TooManyRequests

K = TypeVar("K")
V = TypeVar("V")

MAX_TRACKED_KEYS = 100_000  # a flood of distinct names must not grow memory without bound
FIRST_DELAY = 1.0  # seconds, after failures_per_user failures; doubled by each further failure


@dataclass
class PairFailures:
    """The failed logins of one user name from one address since the last success."""

    count: int = 0
    last: float = 0.0
    wait_until: float = 0.0


class LoginLimiter:
    def __init__(self, config: LoginRateLimit) -> None:
        self.config = config
        self._pairs: dict[tuple[str, str], PairFailures] = {}
        self._addresses: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _pair(self, username: str, address: str, now: float) -> PairFailures | None:
        pair = self._pairs.get((username, address))
        if pair is not None and now - pair.last > self.config.forget_after:
            del self._pairs[(username, address)]
            return None
        return pair

    def _recent(self, address: str, now: float) -> deque[float]:
        times = self._addresses.get(address)
        if times is None:
            return deque()
        while times and times[0] <= now - self.config.window:
            times.popleft()
        if not times:
            del self._addresses[address]
        return times

    def check(self, username: str, address: str, now: float) -> None:
        """Raise TooManyRequests while this user name must wait at this address, or the address is over
        its bound."""
        waits = []
        with self._lock:
            pair = self._pair(username, address, now)
            if pair is not None and pair.wait_until > now:
                waits.append(pair.wait_until - now)
            times = self._recent(address, now)
            bound = self.config.failures_per_address
            if len(times) >= bound:
                waits.append(times[len(times) - bound] + self.config.window - now)
        if waits:
            retry = max(1, math.ceil(max(waits)))
            raise TooManyRequests(
                f"too many failed logins from this address; try again in {retry} s", retry_after=retry
            )

    def failed(self, username: str, address: str, now: float) -> None:
        with self._lock:
            if len(self._pairs) + len(self._addresses) >= MAX_TRACKED_KEYS:
                self._prune(now)
            pair = self._pair(username, address, now) or self._pairs.setdefault((username, address), PairFailures())
            pair.count += 1
            pair.last = now
            beyond = pair.count - self.config.failures_per_user
            if beyond >= 0:
                pair.wait_until = now + min(FIRST_DELAY * 2.0 ** min(beyond, 64), self.config.max_delay)
            self._addresses.setdefault(address, deque()).append(now)

    def succeeded(self, username: str, address: str) -> None:
        """A right password clears that user name's failures at that address (the address keeps its count)."""
        with self._lock:
            self._pairs.pop((username, address), None)

    def _prune(self, now: float) -> None:
        for username, address in list(self._pairs):
            self._pair(username, address, now)
        for address in list(self._addresses):
            self._recent(address, now)
        _forget_oldest_half(self._pairs, lambda pair: pair.last)
        _forget_oldest_half(self._addresses, lambda times: times[-1])


def _forget_oldest_half(table: dict[K, V], last: Callable[[V], float]) -> None:
    if len(table) >= MAX_TRACKED_KEYS // 2:  # all recent: forget the oldest half
        oldest = sorted(table, key=lambda k: last(table[k]))
        for key in oldest[: len(oldest) // 2]:
            del table[key]
