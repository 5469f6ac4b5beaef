"""The failed-login limiter on its own: a growing wait per (user name, address) past failures_per_user,
an address's bound over a sliding window, and nobody held up at another address."""

from __future__ import annotations

import pytest

from pedl.config.security_config import LoginRateLimit
from pedl.errors import TooManyRequests
from pedl.master.identity import login_limiter
from pedl.master.identity.login_limiter import LoginLimiter


def limiter(
    user: int = 3, address: int = 100, window: float = 60.0, max_delay: float = 300.0, forget_after: float = 3600.0
) -> LoginLimiter:
    return LoginLimiter(
        LoginRateLimit(
            failures_per_user=user,
            failures_per_address=address,
            window=window,
            max_delay=max_delay,
            forget_after=forget_after,
        )
    )


def wait_of(lim: LoginLimiter, user: str, address: str, now: float) -> int:
    """The Retry-After a login would get now, 0 when it may go ahead."""
    try:
        lim.check(user, address, now)
    except TooManyRequests as exc:
        assert exc.retry_after is not None
        return exc.retry_after
    return 0


def test_past_the_bound_each_failure_doubles_the_wait_up_to_max_delay() -> None:
    lim = limiter(user=3, max_delay=10)
    now = 0.0
    waits = []
    for _ in range(8):
        assert wait_of(lim, "admin", "10.0.0.9", now) == 0
        lim.failed("admin", "10.0.0.9", now)
        waits.append(wait_of(lim, "admin", "10.0.0.9", now))
        now += waits[-1]
    assert waits == [0, 0, 1, 2, 4, 8, 10, 10]


def test_a_guesser_delays_a_user_at_its_own_address_only() -> None:
    """Failures from one address never hold up the same user name at another: nobody can lock the admin out."""
    lim = limiter(user=2)
    for t in range(20):
        lim.failed("admin", "203.0.113.66", float(t))
    assert wait_of(lim, "admin", "203.0.113.66", 20.0) > 0
    assert wait_of(lim, "admin", "10.0.0.9", 20.0) == 0
    assert wait_of(lim, "bob", "203.0.113.66", 20.0) == 0  # a user name is its own count too


def test_success_clears_that_user_at_that_address_but_not_the_addresss_count() -> None:
    lim = limiter(user=2, address=3)
    lim.failed("u", "a", 0.0)
    lim.failed("u", "a", 1.0)
    assert wait_of(lim, "u", "a", 1.0) == 1
    lim.succeeded("u", "a")
    assert wait_of(lim, "u", "a", 1.0) == 0
    lim.failed("v", "a", 2.0)
    assert wait_of(lim, "w", "a", 3.0) == 60 - 3  # three failures from that address, whichever names


def test_failures_are_forgotten_after_forget_after() -> None:
    lim = limiter(user=1, forget_after=100)
    lim.failed("u", "a", 0.0)
    lim.failed("u", "a", 1.0)
    assert wait_of(lim, "u", "a", 2.0) == 1
    lim.failed("u", "a", 102.0)  # the earlier two are forgotten: this is the first again
    assert wait_of(lim, "u", "a", 102.0) == 1  # (user=1: the first failure already waits 1 s)


def test_memory_stays_bounded_under_a_flood_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login_limiter, "MAX_TRACKED_KEYS", 50)
    lim = limiter(address=10_000)
    for i in range(500):
        lim.failed(f"user-{i}", f"addr-{i % 7}", float(i))
    assert len(lim._pairs) + len(lim._addresses) <= 50 + 2
