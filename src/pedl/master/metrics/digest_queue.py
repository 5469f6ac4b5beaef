"""What the report path hands the digester (digests.py): the (trial, group) pairs with reports to
digest, and the reports the batch path stored, as numbers (`block_of`), so that the digester folds them
without reading them back."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from itertools import chain
from typing import Any

import numpy as np

from pedl.master.metrics.columns import Columns, columns, finite_number, numbers_only

# what the batch path feeds: steps (n,), names (k,), values (k, n) as float64, NaN where a report has no
# finite number for the name (the digests hold only those)
Block = tuple[np.ndarray, tuple[str, ...], np.ndarray]
# reports the batch path hands the digester (as numbers: 8 bytes a step and a value), in all and per
# (trial, group), before it reads them back from the database instead (which cost the digester most of its
# time, and let it fall further behind, while 50,000 reports a second of dicts overflowed a bound of 50,000)
MAX_FED = 400_000
MAX_FED_PER_PAIR = 50_000  # (folding 50,000 reports of 8 names holds the write lock ~35 ms)


class DigestQueue:
    """The (trial, group) pairs with reports to digest, in the order first touched, and the reports
    the batch path stored since a pair was last taken (`feed`), so that the digester folds them
    without reading them back. Thread-safe. What is fed is only a shortcut: digest_one uses it when
    the database holds exactly those reports after the mark, and reads the reports otherwise."""

    def __init__(self, max_fed: int = MAX_FED, max_per_pair: int = MAX_FED_PER_PAIR) -> None:
        self._lock = threading.Lock()
        self._pending: dict[tuple[int, str], None] = {}
        self._fed: dict[tuple[int, str], list[Block]] = {}
        self._fed_count = 0
        self._max_fed, self._max_per_pair = max_fed, max_per_pair
        self._wake: Callable[[], object] | None = None
        self._filling: Callable[[], object] | None = None

    def touch(self, trial_id: int, group: str) -> None:
        with self._lock:
            new = (trial_id, group) not in self._pending
            self._pending[(trial_id, group)] = None
            wake = self._wake
        if new and wake is not None:
            wake()

    def feed(self, trial_id: int, group: str, block: Block | None) -> None:
        """Reports of the pair just committed (`block_of`; None: reports it cannot be told, whose pair's
        feed is dropped), then touch it. Past max_fed reports held in all, the pair's are dropped; past
        max_per_pair for the pair, its oldest blocks (the digester reads what it misses from the database)."""
        key = (trial_id, group)
        with self._lock:
            held = self._fed.setdefault(key, [])
            if block is None:
                self._drop(key)
            else:
                held.append(block)
                self._fed_count += len(block[0])
                while _count(held) > self._max_per_pair:
                    self._fed_count -= len(held.pop(0)[0])
                if self._fed_count > self._max_fed:
                    self._drop(key)
            filling = self._filling if self._fed_count > self._max_fed // 2 else None
        if filling is not None:
            filling()
        self.touch(trial_id, group)

    def _drop(self, key: tuple[int, str]) -> None:
        self._fed_count -= _count(self._fed.pop(key, []))

    def take(self) -> tuple[int, str] | None:
        with self._lock:
            if not self._pending:
                return None
            key = next(iter(self._pending))
            del self._pending[key]
            return key

    def claim(self, key: tuple[int, str]) -> list[Block] | None:
        """What was fed for the pair since it was last claimed (None: nothing, or it was dropped)."""
        with self._lock:
            blocks = self._fed.pop(key, None)
            if blocks is not None:
                self._fed_count -= _count(blocks)
            return blocks or None

    def __len__(self) -> int:
        with self._lock:
            return len(self._pending)

    def set_waker(self, wake: Callable[[], object] | None, *, filling: Callable[[], object] | None = None) -> None:
        """`wake`: a pair has reports to digest; `filling`: the feed holds more than half of max_fed."""
        with self._lock:
            self._wake, self._filling = wake, filling


def _count(blocks: list[Block]) -> int:
    return sum(len(block[0]) for block in blocks)


def block_of(steps: list[int], reports: list[Any], by_name: Columns | None = None) -> Block:
    """What the batch path feeds the digester for these reports (of one group, in batch order): their
    numbers by name. `by_name`: the reports' columns, when they have them (metric_columns.columns)."""
    if by_name is None:
        by_name = columns(reports)
    if by_name is not None:
        names, values_of = by_name
    else:  # reports of different names: each name's values, None where a report lacks it
        names = tuple(dict.fromkeys(chain.from_iterable(r for r in reports if type(r) is dict)))
        values_of = [[r.get(name) if type(r) is dict else None for r in reports] for name in names]
    values = np.array(
        [np.array(v, dtype=np.float64) if numbers_only(v) else [_float(x) for x in v] for v in values_of],
        dtype=np.float64,
    ).reshape(len(names), len(steps))
    return np.array(steps, dtype=np.int64), names, values


def _float(value: Any) -> float:
    """A value as the digests take it: a finite number as a float, anything else NaN (not digested)."""
    return float(value) if finite_number(value) else math.nan
