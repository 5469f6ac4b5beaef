"""pedl.core.outbox: the background sender's queue. First in, first out; the consumer lingers while
few items wait and takes what queued meanwhile; join wakes it and waits until all is done."""

from __future__ import annotations

import threading
import time

from pedl.core.outbox import Outbox


def consume(box: Outbox[int | None], taken: list[list[int]]) -> threading.Thread:
    """A consumer that records, per wake-up, the items it took together (get, then take_while up to the
    end, None)."""

    def run() -> None:
        while True:
            first = box.get()
            if first is None:
                box.done()
                return
            group = [first, *box.take_while(lambda item: item is not None, 10_000)]
            time.sleep(0.01)  # "sending"
            taken.append(group)
            box.done()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_items_come_out_in_order_and_join_waits_until_they_are_done() -> None:
    box: Outbox[int | None] = Outbox(maxsize=100, linger=0.05, wake_at=1000)
    taken: list[list[int]] = []
    t = consume(box, taken)
    for i in range(50):
        box.put(i)
    box.join()
    assert [i for group in taken for i in group] == list(range(50))
    box.put(None)
    t.join(5)
    assert not t.is_alive()


def test_the_consumer_lingers_so_that_a_burst_goes_out_together() -> None:
    box: Outbox[int | None] = Outbox(maxsize=1000, linger=0.5, wake_at=1000)
    taken: list[list[int]] = []
    consume(box, taken)
    for i in range(20):
        box.put(i)
        time.sleep(0.002)  # a training loop's steps: well inside one linger
    box.join()
    assert len(taken) <= 2 and [i for g in taken for i in g] == list(range(20))


def test_a_full_linger_is_not_awaited_once_wake_at_items_wait() -> None:
    box: Outbox[int | None] = Outbox(maxsize=1000, linger=30.0, wake_at=10)
    taken: list[list[int]] = []
    consume(box, taken)
    time.sleep(0.05)  # the consumer is asleep, lingering
    for i in range(10):
        box.put(i)
    deadline = time.monotonic() + 10
    while not taken and time.monotonic() < deadline:
        time.sleep(0.01)
    assert taken and taken[0][0] == 0  # woken by the 10th put, long before the 30 s linger


def test_join_wakes_a_lingering_consumer() -> None:
    box: Outbox[int | None] = Outbox(maxsize=1000, linger=30.0, wake_at=1000)
    taken: list[list[int]] = []
    consume(box, taken)
    box.put(1)
    box.join()  # would take 30 s if it waited for the linger
    assert taken == [[1]]


def test_put_waits_while_the_outbox_is_full() -> None:
    box: Outbox[int | None] = Outbox(maxsize=3, linger=0.01, wake_at=1000)
    for i in range(3):
        box.put(i)
    done = threading.Event()
    threading.Thread(target=lambda: (box.put(3), done.set()), daemon=True).start()
    assert not done.wait(0.1)  # full: the fourth waits
    assert box.get() == 0
    assert done.wait(5)
    assert box.take_while(lambda _: True, 10) == [1, 2, 3]
    assert box.take_while(lambda _: True, 10) == []


def test_take_while_stops_at_the_limit_and_at_the_first_item_that_does_not_belong() -> None:
    box: Outbox[int | None] = Outbox(maxsize=100)
    for i in (1, 2, 3, 4, None, 5):
        box.put(i)
    assert box.take_while(lambda item: item is not None, 2) == [1, 2]
    assert box.take_while(lambda item: item is not None, 10) == [3, 4]
    assert box.take_while(lambda item: item is not None, 10) == []
    assert box.take_while(lambda _: True, 10) == [None, 5]
