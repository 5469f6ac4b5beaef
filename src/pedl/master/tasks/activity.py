"""When a command, notebook, shell or TensorBoard was last used (GenericTask.last_activity, the start
of its idle clock): each request the master's proxy relays to its service, and the task's own reports
that it is in use (a notebook's watcher: a busy kernel, an open terminal). The proxy writes at most
once per THROTTLE_SECONDS per task, whatever the traffic; the throttle lives in memory."""

from __future__ import annotations

import threading

from sqlalchemy import or_, update

from pedl.master.caller_cache import Caller
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.lifecycle.task_access import require_task

G = models.GenericTask
THROTTLE_SECONDS = 10.0
MAX_TRACKED = 100_000  # tasks the throttle remembers; beyond that it forgets those it may (bounded memory)


class ActivityThrottle:
    """Says whether a use of a task should be written now: the first one, then one per `every`
    seconds. Thread-safe (the proxy's HTTP and WebSocket relays call it from the event loop, tests
    from threads)."""

    def __init__(self, every: float = THROTTLE_SECONDS, max_tracked: int = MAX_TRACKED) -> None:
        self.every, self.max_tracked = every, max_tracked
        self._written: dict[str, float] = {}
        self._lock = threading.Lock()

    def due(self, task_id: str, now: float) -> bool:
        with self._lock:
            last = self._written.get(task_id)
            if last is not None and 0 <= now - last < self.every:
                return False
            if last is None and len(self._written) >= self.max_tracked:
                # those written longer ago than `every` would be due anyway: forgetting them changes nothing
                self._written = {k: v for k, v in self._written.items() if 0 <= now - v < self.every}
                if len(self._written) >= self.max_tracked:
                    self._written.clear()
            self._written[task_id] = now
            return True


def touch(ctx: MasterContext, task_id: str) -> None:
    """The task's service was used now (one short transaction; a later time never goes back)."""
    now = ctx.clock.now()
    with ctx.db.session() as s:
        s.execute(
            update(G)
            .where(G.id == task_id, or_(G.last_activity.is_(None), G.last_activity < now))
            .values(last_activity=now)
        )


def report(ctx: MasterContext, who: Caller, allocation_id: str, *, idle: bool) -> None:
    """The task says whether it is in use (its own token, its own live allocation). In use restarts
    its idle clock; idle changes nothing (the clock runs from the last use). A trial's allocation has
    no idle clock: its report is taken and changes nothing."""
    now = ctx.clock.now()
    with ctx.db.session() as s:
        alloc = require_task(s, who, allocation_id=allocation_id)
        if idle or alloc.trial_id is not None:
            return
        s.execute(
            update(G)
            .where(G.id == alloc.task_id, or_(G.last_activity.is_(None), G.last_activity < now))
            .values(last_activity=now)
        )
