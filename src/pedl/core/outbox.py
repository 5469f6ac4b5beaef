"""The background sender's queue: first in, first out, one consumer thread, and cheap for the
training loop that fills it (a report per step).

queue.Queue takes a lock and signals a condition on every put, about as much time as the rest of a
report; here a put is a deque append (atomic in CPython). Waking the consumer for each report would
cost more still: the thread takes the GIL from the training loop once per step. So the consumer
sleeps up to `linger` seconds while fewer than `wake_at` items wait, and then takes them all at once;
`join` wakes it at once, and waits until everything put has been taken and the consumer has said it
is done with it."""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Outbox(Generic[T]):
    def __init__(self, maxsize: int, *, linger: float = 0.1, wake_at: int = 1000) -> None:
        self._items: deque[T] = deque()
        self._maxsize, self._linger, self._wake_at = maxsize, linger, wake_at
        self._wake = threading.Event()
        self._sleeping = False
        self._busy = False  # the consumer holds items it has not said it is done with
        self._lingered = False  # the consumer waited once already for what is queued
        self._done = threading.Condition()

    def put(self, item: T) -> None:
        while len(self._items) >= self._maxsize:  # backpressure: the master is slower than the loop
            time.sleep(0.001)
        self._items.append(item)
        if self._sleeping and len(self._items) >= self._wake_at:
            self._wake.set()

    def get(self) -> T:
        """The next item (the consumer only): at once when `wake_at` wait or the consumer has
        already lingered for them, else after lingering up to `linger` for more to come."""
        while True:
            if self._items and (self._lingered or len(self._items) >= self._wake_at):
                self._lingered = False
                self._busy = True  # before the pop: join never sees it neither queued nor held
                return self._items.popleft()
            self._wake.clear()
            self._sleeping = True
            if len(self._items) < self._wake_at:  # a put between the check above and `sleeping` is seen here
                self._wake.wait(self._linger)
            self._sleeping = False
            self._lingered = bool(self._items)

    def take_while(self, belongs: Callable[[T], bool], limit: int) -> list[T]:
        """Up to `limit` more items at once, from the front, as long as each `belongs` (the consumer only,
        holding what `get` gave it; it is done with all of them together)."""
        items, taken = self._items, []
        while items and len(taken) < limit and belongs(items[0]):  # producers only append: items[0] stays
            taken.append(items.popleft())
        return taken

    def done(self) -> None:
        """The consumer is done with what it took."""
        with self._done:
            self._busy = False
            self._done.notify_all()

    def join(self) -> None:
        """Wait until every item put before this call has been taken and is done with."""
        self._wake.set()  # no lingering: the caller waits
        with self._done:
            while self._items or self._busy:
                self._done.wait(0.05)  # producers signal nothing: look again now and then
                self._wake.set()
