"""Engine and session factory for SQLite (embedded default) and PostgreSQL (production)."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from pedl.master import data_dir
from pedl.master.db.change_counters import ChangeCounters


def make_engine(url: str, *, readonly: bool = False) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("sqlite:///", 1)[-1]
        if path and path != ":memory:":
            data_dir.private_database(Path(path))
        engine = create_engine(
            url, connect_args={"check_same_thread": False, "timeout": 30}, pool_size=8, max_overflow=16
        )

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=30000")
            cur.close()
            # pysqlite's own transaction handling starts transactions lazily as DEFERRED, and two
            # deferred readers that both upgrade to writers deadlock with SQLITE_BUSY at once.
            # BEGIN IMMEDIATE takes the write lock up front, so writers queue on busy_timeout.
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn) -> None:
            # readers (in WAL mode) neither wait for nor block the writer
            conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


class WriterQueue:
    """SQLite has one writer at a time. Left to SQLite, a writer that finds the write lock taken polls for it
    with sleeps growing to 100 ms (its busy handler), so a request could miss every gap between a long
    job's short transactions and wait for the whole job. The master's writers queue here instead, first
    come first served, each woken the moment the one before it ends. Re-entrant in one thread (a nested
    session goes straight to SQLite); a wait longer than `timeout` fails as SQLite's own busy wait does."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.timeout = timeout
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[object] = deque()  # the writers waiting, first come first
        self._owner: int | None = None  # the thread whose turn it is
        self._depth = 0

    @contextmanager
    def turn(self) -> Iterator[None]:
        me = threading.get_ident()
        with self._cond:
            if self._owner == me:
                self._depth += 1
            else:
                self._wait_for_turn(me)
        try:
            yield
        finally:
            with self._cond:
                self._depth -= 1
                if self._depth == 0:
                    self._owner = None
                    self._cond.notify_all()

    def _wait_for_turn(self, me: int) -> None:
        token = object()
        self._queue.append(token)
        deadline = time.monotonic() + self.timeout
        while self._owner is not None or self._queue[0] is not token:
            left = deadline - time.monotonic()
            if left <= 0:
                self._queue.remove(token)
                self._cond.notify_all()  # the writer behind may be first now
                raise OperationalError(
                    "BEGIN IMMEDIATE",
                    None,
                    sqlite3.OperationalError(
                        f"database is locked: waited {self.timeout:.0f} s for the master's other writers"
                    ),
                )
            self._cond.wait(left)
        self._queue.popleft()
        self._owner, self._depth = me, 1


class Database:
    """Owns the engine and hands out short-lived sessions; services commit inside `session()`."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.is_sqlite = url.startswith("sqlite")
        self.engine = make_engine(url)
        self._factory = sessionmaker(self.engine, expire_on_commit=False)
        self.changes = ChangeCounters()  # what each commit wrote, for conditional reads (ETags)
        self.changes.attach(self._factory)
        self.read_engine = make_engine(url, readonly=True) if self.is_sqlite else self.engine
        self._read_factory = sessionmaker(self.read_engine, expire_on_commit=False)
        self.writers = WriterQueue() if self.is_sqlite else None

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self.writers.turn() if self.writers is not None else nullcontext(), self._factory() as s:
            try:
                yield s
                s.commit()
            except BaseException:
                s.rollback()
                raise

    @contextmanager
    def read_session(self) -> Iterator[Session]:
        """A session for reads only: on SQLite it does not take the write lock."""
        with self._read_factory() as s:  # closing ends the transaction and keeps loaded rows usable
            yield s

    def dispose(self) -> None:
        self.engine.dispose()
        if self.read_engine is not self.engine:
            self.read_engine.dispose()
