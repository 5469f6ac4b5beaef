"""The SQLite master's writers queue first come, first served (db/engine.py WriterQueue): each is woken
when the one before it ends, one thread may nest, and a writer that waits too long fails as SQLite's
busy wait does, without stopping the writers behind it."""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from pedl.master.db.engine import Database, WriterQueue


def _start_waiter(q: WriterQueue, name: str, order: list[str], queued: threading.Event) -> threading.Thread:
    def run() -> None:
        queued.set()
        with q.turn():
            order.append(name)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def _wait_queued(q: WriterQueue, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(q._queue) < n:
        assert time.monotonic() < deadline, f"{n} writers never queued"
        time.sleep(0.001)


def test_writers_take_their_turns_in_the_order_they_came() -> None:
    q = WriterQueue()
    order: list[str] = []
    threads = []
    with q.turn():
        for i, name in enumerate("abcde"):
            threads.append(_start_waiter(q, name, order, threading.Event()))
            _wait_queued(q, i + 1)  # each has queued before the next comes
        assert order == []  # nobody writes while the turn is held
    for t in threads:
        t.join(10)
    assert order == list("abcde")


def test_one_thread_may_nest_its_turns() -> None:
    q = WriterQueue()
    with q.turn(), q.turn():
        assert q._depth == 2
    assert q._owner is None and q._depth == 0


def test_a_writer_that_waits_too_long_fails_like_sqlite_and_the_next_one_still_gets_its_turn() -> None:
    q = WriterQueue(timeout=0.2)
    failed: list[BaseException] = []
    order: list[str] = []
    release = threading.Event()

    def impatient() -> None:
        try:
            with q.turn():
                order.append("impatient")
        except OperationalError as exc:
            failed.append(exc)

    def holder() -> None:
        with q.turn():
            release.wait(10)

    h = threading.Thread(target=holder, daemon=True)
    h.start()
    _wait_until(lambda: q._owner is not None)
    t1 = threading.Thread(target=impatient, daemon=True)
    t1.start()
    _wait_queued(q, 1)
    t1.join(10)
    assert failed and "database is locked" in str(failed[0]) and order == []
    q.timeout = 10  # the queue, after the failure, still serves the next writer
    t2 = _start_waiter(q, "patient", order, threading.Event())
    _wait_queued(q, 1)
    release.set()
    t2.join(10)
    h.join(10)
    assert order == ["patient"]


def _wait_until(cond) -> None:
    deadline = time.monotonic() + 10
    while not cond():
        assert time.monotonic() < deadline
        time.sleep(0.001)


def test_the_sqlite_database_queues_its_writing_sessions_and_not_its_reads(tmp_path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'q.db'}")
    try:
        assert db.writers is not None
        with db.session() as s:
            s.execute(text("CREATE TABLE t (x INTEGER)"))
        got: list[int] = []
        with db.session() as s:
            s.execute(text("INSERT INTO t VALUES (1)"))
            writer = threading.Thread(target=lambda: _insert(db, 2), daemon=True)
            writer.start()
            _wait_queued(db.writers, 1)  # the second writer waits its turn, not SQLite's busy handler
            with db.read_session() as r:  # a read neither waits nor sees the uncommitted row
                got = [row[0] for row in r.execute(text("SELECT x FROM t"))]
        writer.join(10)
        assert got == []
        with db.read_session() as r:
            assert sorted(row[0] for row in r.execute(text("SELECT x FROM t"))) == [1, 2]
    finally:
        db.dispose()


def _insert(db: Database, x: int) -> None:
    with db.session() as s:
        s.execute(text("INSERT INTO t VALUES (:x)"), {"x": x})


@pytest.mark.parametrize("db_kind", ["postgres"], indirect=True)
def test_postgresql_has_no_writer_queue(master_config) -> None:
    db = Database(master_config.database_url())
    try:
        assert db.writers is None
    finally:
        db.dispose()
