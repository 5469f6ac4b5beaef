"""The proxy's throttle on writes of a task's last use: the first use, then one per interval."""

from __future__ import annotations

from pedl.master.tasks.activity import ActivityThrottle


def test_one_write_per_task_per_interval() -> None:
    t = ActivityThrottle(every=10)
    assert t.due("a", 100.0)
    assert not t.due("a", 105.0) and not t.due("a", 109.9)
    assert t.due("b", 105.0)  # each task has its own
    assert t.due("a", 110.0)
    assert not t.due("a", 115.0)
    assert t.due("a", 50.0)  # a clock that went back: write rather than wait


def test_memory_is_bounded_and_forgetting_loses_no_due_write() -> None:
    t = ActivityThrottle(every=10, max_tracked=3)
    for i, name in enumerate("abc"):
        assert t.due(name, 100.0 + i)
    # full: those written more than `every` ago are forgotten first; c (recent) is still throttled
    assert t.due("d", 111.5)
    assert not t.due("c", 111.5)
    assert len(t._written) <= 3
