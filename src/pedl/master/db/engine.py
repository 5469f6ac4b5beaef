"""Engine and session factory for SQLite (embedded default) and PostgreSQL (production)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

from pedl.master.db.change_counters import ChangeCounters


def make_engine(url: str, *, readonly: bool = False) -> Engine:
    if url.startswith("sqlite"):
        path = url.split("sqlite:///", 1)[-1]
        if path and path != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 30},
                               pool_size=8, max_overflow=16)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn, _record) -> None:  # noqa: ANN001
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
        def _begin(conn) -> None:  # noqa: ANN001
            # readers (in WAL mode) neither wait for nor block the writer
            conn.exec_driver_sql("BEGIN" if readonly else "BEGIN IMMEDIATE")

        return engine
    return create_engine(url, pool_size=10, max_overflow=20, pool_pre_ping=True)


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

    @contextmanager
    def session(self) -> Iterator[Session]:
        with self._factory() as s:
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
