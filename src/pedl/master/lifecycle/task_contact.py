"""When a task first called the master with its own token: a trial that exits 0 without ever having
done so completes, as in Determined, and its log says that nothing of it reached the master.

The first call of each allocation costs one UPDATE; later ones a set lookup. The set is per master
process, so after a restart the first call writes again, which changes nothing (the UPDATE only
fills a NULL).
"""

from __future__ import annotations

import threading

from sqlalchemy import update

from pedl.master.db import models
from pedl.master.db.engine import Database

MAX_REMEMBERED = 50_000  # allocation ids kept in memory; past it the set starts over (one UPDATE each)


class TaskContact:
    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def note(self, db: Database, allocation_id: str, now: float) -> None:
        with self._lock:
            if allocation_id in self._seen:
                return
        with db.session() as s:
            s.execute(
                update(models.Allocation)
                .where(models.Allocation.id == allocation_id, models.Allocation.contacted_at.is_(None))
                .values(contacted_at=now)
            )
        with self._lock:
            if len(self._seen) >= MAX_REMEMBERED:
                self._seen.clear()
            self._seen.add(allocation_id)


NEVER_REPORTED = (
    "the trial's process exited 0 without ever calling the master, so nothing it reported reached pedl; "
    "completed as Determined does. A script that does not use the Core API does this; so does one whose "
    "det.get_cluster_info() is None (its harness found no /run/determined/info) and whose det.core.init() "
    "hands back dummy contexts. For the latter, run the agent as root (tasks get /run/determined/info in a "
    "mount namespace of their own) or give the experiment an environment.image on an agent with Docker; a "
    "pedl.core script reports through DET_* variables and needs neither"
)
