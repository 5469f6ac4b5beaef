"""Failed logins per user name and per client address over a sliding window. Past either bound a
login answers 429 with Retry-After (when the oldest failure leaves the window), before the password
is even checked, so guessing costs the guesser time and the master no argon2 work."""

from __future__ import annotations

import math
import threading
from collections import deque

from pedl.config.security_config import LoginRateLimit
from pedl.errors import TooManyRequests

MAX_TRACKED_KEYS = 100_000  # a flood of distinct names must not grow memory without bound


class LoginLimiter:
    def __init__(self, config: LoginRateLimit) -> None:
        self.config = config
        self._failures: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, key: tuple[str, str], now: float) -> deque[float]:
        times = self._failures.get(key)
        if times is None:
            return deque()
        while times and times[0] <= now - self.config.window:
            times.popleft()
        if not times:
            del self._failures[key]
        return times

    def check(self, username: str, address: str, now: float) -> None:
        """Raise TooManyRequests while either key is over its bound."""
        with self._lock:
            waits = []
            for key, bound in ((("user", username), self.config.failures_per_user),
                               (("address", address), self.config.failures_per_address)):
                times = self._recent(key, now)
                if len(times) >= bound:
                    waits.append(times[len(times) - bound] + self.config.window - now)
        if waits:
            retry = max(1, math.ceil(max(waits)))
            raise TooManyRequests(f"too many failed logins for this user or address; try again in {retry} s",
                                  retry_after=retry)

    def failed(self, username: str, address: str, now: float) -> None:
        with self._lock:
            if len(self._failures) >= MAX_TRACKED_KEYS:
                self._prune(now)
            for key in (("user", username), ("address", address)):
                self._failures.setdefault(key, deque()).append(now)

    def succeeded(self, username: str) -> None:
        """A right password clears that user's failures (the address keeps its count)."""
        with self._lock:
            self._failures.pop(("user", username), None)

    def _prune(self, now: float) -> None:
        for key in list(self._failures):
            self._recent(key, now)
        if len(self._failures) >= MAX_TRACKED_KEYS:  # all recent: forget the oldest half
            oldest = sorted(self._failures, key=lambda k: self._failures[k][-1])
            for key in oldest[: len(oldest) // 2]:
                del self._failures[key]
