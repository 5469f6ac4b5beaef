"""The failed-login limiter on its own: per-user and per-address bounds over a sliding window."""

from __future__ import annotations

import pytest

from pedl.config.security_config import LoginRateLimit
from pedl.errors import TooManyRequests
from pedl.master.services import login_limiter
from pedl.master.services.login_limiter import LoginLimiter


def limiter(user: int = 3, address: int = 10, window: float = 60.0) -> LoginLimiter:
    return LoginLimiter(LoginRateLimit(failures_per_user=user, failures_per_address=address, window=window))


def test_user_bound_and_retry_after_counts_from_the_oldest_failure() -> None:
    lim = limiter()
    for t in (0.0, 10.0, 20.0):
        lim.check("u", "a", t)
        lim.failed("u", "a", t)
    with pytest.raises(TooManyRequests) as exc:
        lim.check("u", "a", 30.0)
    assert exc.value.retry_after == 30  # the failure at 0 leaves the window at 60
    lim.check("u", "a", 60.5)  # one failure left the window: room again


def test_success_clears_the_users_failures_but_not_the_addresss() -> None:
    lim = limiter(user=2, address=3)
    lim.failed("u", "a", 0.0)
    lim.failed("u", "a", 1.0)
    lim.succeeded("u")
    lim.check("u", "a", 2.0)
    lim.failed("v", "a", 2.0)
    with pytest.raises(TooManyRequests):
        lim.check("w", "a", 3.0)  # three failures from that address, whichever names


def test_memory_stays_bounded_under_a_flood_of_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(login_limiter, "MAX_TRACKED_KEYS", 50)
    lim = limiter(address=10_000)
    for i in range(500):
        lim.failed(f"user-{i}", f"addr-{i % 7}", float(i))
    assert len(lim._failures) <= 50 + 2
