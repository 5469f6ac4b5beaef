"""The master's own recent log records, for `det master logs` and `pedl master logs`: a logging
handler that keeps the last records in memory, each with an id one greater than the one before."""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass

RECORDS_KEPT = 10_000
MESSAGE_MAX = 16_384  # characters of one record kept (a traceback can be long)

LEVELS = (
    (logging.CRITICAL, "LOG_LEVEL_CRITICAL"),
    (logging.ERROR, "LOG_LEVEL_ERROR"),
    (logging.WARNING, "LOG_LEVEL_WARNING"),
    (logging.INFO, "LOG_LEVEL_INFO"),
    (logging.DEBUG, "LOG_LEVEL_DEBUG"),
)


def level_name(levelno: int) -> str:
    """Determined's LogLevel for a logging level (below DEBUG: TRACE)."""
    return next((name for floor, name in LEVELS if levelno >= floor), "LOG_LEVEL_TRACE")


@dataclass(frozen=True)
class MasterLogEntry:
    id: int
    timestamp: float  # the record's wall-clock time
    level: str
    message: str


class MasterLogRing(logging.Handler):
    """The last `capacity` records the master's process logged. Ids start at 1 and never repeat, so a
    reader follows with `after(last id)`; a record dropped from the ring is gone."""

    def __init__(self, capacity: int = RECORDS_KEPT) -> None:
        super().__init__(level=logging.NOTSET)
        self._entries: deque[MasterLogEntry] = deque(maxlen=capacity)
        self._next_id = 1
        self._guard = threading.Lock()  # not the handler's own lock: readers take this one only
        self.setFormatter(logging.Formatter("%(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record)[:MESSAGE_MAX]
        except Exception:  # a bad format string must not break the caller's logging
            self.handleError(record)
            return
        with self._guard:
            self._entries.append(MasterLogEntry(self._next_id, record.created, level_name(record.levelno), text))
            self._next_id += 1

    def last_id(self) -> int:
        with self._guard:
            return self._next_id - 1

    def window(self, offset: int, limit: int) -> list[MasterLogEntry]:
        """Determined's offset and limit over the records kept: offset >= 0 skips that many from the
        oldest, a negative offset starts that many from the newest; limit 0 is no limit."""
        with self._guard:
            kept = list(self._entries)
        start = max(len(kept) + offset, 0) if offset < 0 else offset
        return kept[start : start + limit] if limit else kept[start:]

    def after(self, last_id: int, limit: int = 0) -> list[MasterLogEntry]:
        """Records with an id greater than `last_id`, oldest first (at most `limit`; 0: all)."""
        with self._guard:
            if not self._entries or self._entries[-1].id <= last_id:
                return []
            skip = max(last_id - self._entries[0].id + 1, 0)  # ids are consecutive within the ring
            kept = list(self._entries)[skip:]
        return kept[:limit] if limit else kept

    def attach(self, logger: logging.Logger | None = None) -> None:
        (logger or logging.getLogger()).addHandler(self)

    def detach(self, logger: logging.Logger | None = None) -> None:
        (logger or logging.getLogger()).removeHandler(self)
