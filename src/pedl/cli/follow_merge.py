"""`--follow` output in the order things happened: an experiment's events (polled) and its trials'
log lines (streamed) wait here until the other stream has been read past them, then print oldest first."""

from __future__ import annotations

import heapq
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

# Seconds an event waits for log lines of the same moment that are still on their way: an agent
# ships lines in batches (0.2 s) and the master's log stream looks for new lines every 0.25 s.
EVENT_HOLD = 1.0
# Seconds a log line waits at most for the next read of the events (a master that stopped answering).
LINE_HOLD_MAX = 10.0

EVENT, LINE = 0, 1  # at the same instant, the event (a state change) is shown before the line


@dataclass(order=True, frozen=True)
class Entry:
    time: float  # when it happened: the master's clock for events, the agent's for log lines
    kind: int  # EVENT or LINE
    seq: int  # the master's id of the event or the line: its order among equal times
    text: str = field(compare=False)
    received: float = field(compare=False)  # our monotonic clock when it arrived here


class FollowMerge:
    """Collects entries from any thread; `release` prints, oldest first, every entry that no entry
    still to come can precede:
    - a log line, once a read of the events that began after the line arrived has finished (an event
      from before the line was stored before the line reached us, so that read returned it);
    - an event, EVENT_HOLD seconds after it arrived (log lines from before it have reached us by then).
    An entry waits behind an older one that is not ready yet, so the order holds. Entries may be
    added from any thread; `release` and `flush` are called from one."""

    def __init__(
        self,
        emit: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
        event_hold: float = EVENT_HOLD,
        line_hold_max: float = LINE_HOLD_MAX,
    ) -> None:
        self._emit, self.clock = emit, clock
        self._event_hold, self._line_hold_max = event_hold, line_hold_max
        self._heap: list[Entry] = []
        self._lock = threading.Lock()
        self._events_read_from = -math.inf  # when the last finished read of the events began

    def add_line(self, when: float, seq: int, text: str) -> None:
        self._push(Entry(when, LINE, seq, text, self.clock()))

    def add_events(self, events: Iterable[tuple[float, int, str]], read_began: float) -> None:
        """The events of one read (time, id, text), and when that read began (from `clock`)."""
        now = self.clock()
        with self._lock:
            for when, seq, text in events:
                heapq.heappush(self._heap, Entry(when, EVENT, seq, text, now))
            self._events_read_from = max(self._events_read_from, read_began)

    def events_complete(self) -> None:
        """No event is still to come (the experiment ended and its events were read after that)."""
        with self._lock:
            self._events_read_from = math.inf

    def release(self) -> None:
        for entry in self._take(everything=False):
            self._emit(entry.text)

    def flush(self) -> None:
        """Print everything held, in order: when no more entries can arrive."""
        for entry in self._take(everything=True):
            self._emit(entry.text)

    def held(self) -> int:
        with self._lock:
            return len(self._heap)

    def _push(self, entry: Entry) -> None:
        with self._lock:
            heapq.heappush(self._heap, entry)

    def _ready(self, entry: Entry, now: float) -> bool:
        if entry.kind == EVENT:
            return now - entry.received >= self._event_hold
        return self._events_read_from > entry.received or now - entry.received >= self._line_hold_max

    def _take(self, everything: bool) -> list[Entry]:
        out: list[Entry] = []
        now = self.clock()
        with self._lock:
            while self._heap and (everything or self._ready(self._heap[0], now)):
                out.append(heapq.heappop(self._heap))
        return out
