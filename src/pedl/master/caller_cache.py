"""Resolved callers (user or task tokens) for a few seconds: a trial reporting metrics many times a
second would otherwise pay a token lookup per report. Logout, the end of an allocation, and a user's
deactivation or new password drop entries at once, so a revoked token stops working immediately."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from pedl.master.db import models


@dataclass
class Caller:
    user: models.User
    allocation_id: str | None = None  # set when a task calls with its session token
    # set when a task calls as its owner (DET_USER_TOKEN): a user caller, valid while this allocation lives
    for_allocation: str | None = None
    expires_at: float | None = None  # of a login token
    issued_at: float | None = None  # of a login token: a fresh one may change its own password
    # of a task's token, as the allocation held it when resolved: a report is refused once the allocation holds
    # another (its owner was deactivated or changed their password: identity/user_revocation.py)
    token_hash: str | None = None


class CallerCache:
    TTL = 5.0

    def __init__(self) -> None:
        self._entries: dict[str, tuple[float, Caller]] = {}
        self._lock = threading.Lock()

    def get(self, token: str, now: float) -> Caller | None:
        with self._lock:
            hit = self._entries.get(token)
            if hit is None or hit[0] < now:
                return None
            return hit[1]

    def put(self, token: str, who: Caller, now: float) -> None:
        with self._lock:
            if len(self._entries) > 10_000:
                self._entries = {k: v for k, v in self._entries.items() if v[0] >= now}
            until = now + self.TTL if who.expires_at is None else min(now + self.TTL, who.expires_at)
            self._entries[token] = (until, who)

    def drop(self, token: str) -> None:
        with self._lock:
            self._entries.pop(token, None)

    def drop_user(self, user_id: int) -> None:
        """Forget every token of a user, their tasks' included (edited, deactivated, a new password)."""
        with self._lock:
            self._entries = {k: v for k, v in self._entries.items() if v[1].user.id != user_id}

    def drop_allocation(self, allocation_id: str) -> None:
        with self._lock:
            self._entries = {
                k: v for k, v in self._entries.items() if allocation_id not in (v[1].allocation_id, v[1].for_allocation)
            }
