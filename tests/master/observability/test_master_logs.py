"""The master's log ring: the last records with consecutive ids, read by offset (from either end)
and after an id, levels in Determined's names."""

from __future__ import annotations

import logging

from pedl.master.observability.master_logs import MasterLogRing, level_name


def record(msg: str, level: int = logging.INFO, args: tuple = ()) -> logging.LogRecord:
    return logging.LogRecord("pedl.master", level, __file__, 1, msg, args, None)


def test_the_ring_keeps_the_last_records_with_ids_that_never_repeat() -> None:
    ring = MasterLogRing(capacity=3)
    for i in range(5):
        ring.emit(record(f"line {i}"))
    assert [(e.id, e.message) for e in ring.window(0, 0)] == [
        (3, "pedl.master: line 2"),
        (4, "pedl.master: line 3"),
        (5, "pedl.master: line 4"),
    ]
    assert ring.last_id() == 5
    assert [e.id for e in ring.window(-2, 0)] == [4, 5]
    assert [e.id for e in ring.window(-10, 0)] == [3, 4, 5]
    assert [e.id for e in ring.window(1, 1)] == [4]
    assert ring.window(7, 0) == []
    assert [e.id for e in ring.after(3)] == [4, 5]
    assert [e.id for e in ring.after(0)] == [3, 4, 5]  # records dropped from the ring are gone
    assert [e.id for e in ring.after(3, limit=1)] == [4]
    assert ring.after(5) == []


def test_levels_and_what_a_record_says() -> None:
    assert [level_name(n) for n in (5, 10, 20, 30, 40, 50)] == [
        "LOG_LEVEL_TRACE",
        "LOG_LEVEL_DEBUG",
        "LOG_LEVEL_INFO",
        "LOG_LEVEL_WARNING",
        "LOG_LEVEL_ERROR",
        "LOG_LEVEL_CRITICAL",
    ]
    ring = MasterLogRing()
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        rec = record("failed %s", logging.ERROR, ("x",))
        rec.exc_info = sys.exc_info()
    ring.emit(rec)
    [entry] = ring.window(0, 0)
    assert entry.level == "LOG_LEVEL_ERROR" and entry.message.startswith("pedl.master: failed x\nTraceback")
    assert "ValueError: boom" in entry.message


def test_attached_it_sees_what_the_process_logs() -> None:
    ring = MasterLogRing()
    ring.attach()
    try:
        logging.getLogger("pedl.master.somewhere").warning("seen")
    finally:
        ring.detach()
    logging.getLogger("pedl.master.somewhere").warning("not seen")
    assert [e.message for e in ring.window(0, 0)] == ["pedl.master.somewhere: seen"]
