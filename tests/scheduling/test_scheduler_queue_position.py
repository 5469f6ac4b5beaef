"""The scheduler orders requests by priority, then their job's queue position (`det job update
--ahead-of`), then FIFO; a request without a position keeps its place by its own queue time."""

from __future__ import annotations

from pedl.scheduling.scheduler import AgentSnapshot, SlotRequest, order_requests, schedule


def test_position_orders_equal_priorities_and_never_beats_priority() -> None:
    late_first = SlotRequest("b", 1, 42, queued_at=100.0, position=5.0)  # queued last, moved to the front
    early = SlotRequest("a", 1, 42, queued_at=1.0, position=10.0)
    urgent = SlotRequest("u", 1, 10, queued_at=200.0, position=99.0)
    sibling = SlotRequest("a2", 1, 42, queued_at=50.0, position=10.0)  # the same job: FIFO among its own
    assert [r.allocation_id for r in order_requests([early, late_first, sibling, urgent])] == ["u", "b", "a", "a2"]


def test_without_positions_the_order_is_fifo() -> None:
    reqs = [SlotRequest("x", 1, 42, queued_at=3.0), SlotRequest("y", 1, 42, queued_at=2.0)]
    assert [r.allocation_id for r in order_requests(reqs)] == ["y", "x"]


def test_the_first_in_the_queue_gets_the_only_slot() -> None:
    agent = AgentSnapshot("a1", ("s0",), ("s0",))
    reqs = [
        SlotRequest("old", 1, 42, queued_at=1.0, position=1.0),
        SlotRequest("moved", 1, 42, queued_at=9.0, position=0.5),
    ]
    [placed] = schedule(reqs, [agent])
    assert placed.allocation_id == "moved"
