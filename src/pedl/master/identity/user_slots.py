"""Work a user holds open at once (a model upload being read, a followed log stream), counted per user and
in total: a slot is taken before the work starts, and past either bound the request gets a 429 naming it."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from pedl.errors import TooManyRequests


@dataclass(frozen=True)
class Bound:
    limit: int
    setting: str  # the master.yaml key that sets it, named in the refusal


class UserSlots:
    """Thread-safe counts of what each user holds (`what`, in refusals: "model uploads in progress")."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._lock = threading.Lock()
        self._per_user: Counter[int] = Counter()
        self._total = 0

    def held(self, user_id: int | None = None) -> int:
        with self._lock:
            return self._total if user_id is None else self._per_user[user_id]

    def take(self, user_id: int, per_user: Bound, total: Bound | None = None) -> Slot:
        """A slot of `user_id`'s, or TooManyRequests naming the bound it would pass."""
        with self._lock:
            if self._per_user[user_id] >= per_user.limit:
                raise TooManyRequests(
                    f"you already have {per_user.limit} {self.what} ({per_user.setting}); "
                    "wait for one to end and retry",
                    retry_after=1,
                )
            if total is not None and self._total >= total.limit:
                raise TooManyRequests(
                    f"the master already has {total.limit} {self.what} ({total.setting}); retry shortly", retry_after=1
                )
            self._per_user[user_id] += 1
            self._total += 1
        return Slot(self, user_id)

    def _give_back(self, user_id: int) -> None:
        with self._lock:
            self._total -= 1
            self._per_user[user_id] -= 1
            if self._per_user[user_id] <= 0:
                del self._per_user[user_id]


class Slot:
    """One taken slot; `release` gives it back, once however often it is called."""

    def __init__(self, slots: UserSlots, user_id: int) -> None:
        self._slots = slots
        self._user_id = user_id
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._slots._give_back(self._user_id)

    @contextmanager
    def held(self) -> Iterator[None]:
        try:
            yield
        finally:
            self.release()
