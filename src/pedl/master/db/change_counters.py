"""A counter per table, bumped by every committed session that wrote to it. Readers that poll (the
WebUI) turn the counters of the tables a view reads into an ETag, so an unchanged view costs the
master a dictionary lookup instead of a query. The counters live in this master's memory: a restart
starts them over under a new boot id, so no ETag from before it can match."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

_PENDING = "pedl_changed_tables"


class ChangeCounters:
    def __init__(self) -> None:
        self.boot = uuid.uuid4().hex[:12]
        self._versions: dict[str, int] = {}
        self._lock = threading.Lock()

    def bump(self, tables: Iterable[str]) -> None:
        with self._lock:
            for table in tables:
                self._versions[table] = self._versions.get(table, 0) + 1

    def versions(self, tables: Iterable[str]) -> tuple[int, ...]:
        with self._lock:
            return tuple(self._versions.get(t, 0) for t in tables)

    def tag(self, tables: Iterable[str], *more: object) -> str:
        """A weak ETag for a view that reads `tables` (and depends on `more`, e.g. the caller)."""
        parts = [self.boot, *(str(v) for v in self.versions(tables)), *(str(m) for m in more)]
        return 'W/"' + ".".join(parts) + '"'

    def attach(self, factory: sessionmaker) -> None:
        """Count the writes of every session `factory` makes: ORM flushes and DML statements run
        through Session.execute, bumped once the transaction commits (a rollback bumps nothing)."""
        event.listen(factory, "after_flush", _after_flush)
        event.listen(factory, "do_orm_execute", _do_orm_execute)
        event.listen(factory, "after_commit", lambda s: self.bump(s.info.pop(_PENDING, ())))
        event.listen(factory, "after_rollback", _forget)
        event.listen(factory, "after_soft_rollback", lambda s, _previous: _forget(s))


def _pending(session: Session) -> set[str]:
    return session.info.setdefault(_PENDING, set())


def _after_flush(session: Session, _context: Any) -> None:
    pending = _pending(session)
    for obj in (*session.new, *session.dirty, *session.deleted):
        table = getattr(obj, "__tablename__", None)
        if table:
            pending.add(table)


def _do_orm_execute(state: ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        table = getattr(state.statement, "table", None)
        name = getattr(table, "name", None)
        if name:
            _pending(state.session).add(name)


def _forget(session: Session) -> None:
    session.info.pop(_PENDING, None)
