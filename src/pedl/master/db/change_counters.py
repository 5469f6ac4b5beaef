"""A counter per table, bumped by every committed session that wrote to it. Readers that poll (the
WebUI) turn the counters of the tables a view reads into an ETag, so an unchanged view costs the
master a dictionary lookup instead of a query. The counters live in this master's memory: a restart
starts them over under a new boot id, so no ETag from before it can match.

Each table also has a loud version, which a write made with QUIET does not bump: the agents'
heartbeats, which the scheduling pass writes every pass, are in the ETags but leave its cache of the
agents' rows (cluster/known_agents.py) valid."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterable
from typing import Any

from sqlalchemy import event
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

_PENDING = "pedl_changed_tables"
_LOUD = "pedl_loudly_changed_tables"

# execution options of a write that changes nothing a cache keyed on the loud version keeps
QUIET = {"pedl_quiet": True}


class ChangeCounters:
    def __init__(self) -> None:
        self.boot = uuid.uuid4().hex[:12]
        self._versions: dict[str, int] = {}
        self._loud: dict[str, int] = {}
        self._lock = threading.Lock()

    def bump(self, tables: Iterable[str], loud: Iterable[str] | None = None) -> None:
        """`loud`: those of `tables` written otherwise than QUIET (all of them by default)."""
        tables = tuple(tables)
        with self._lock:
            for table in tables:
                self._versions[table] = self._versions.get(table, 0) + 1
            for table in tables if loud is None else loud:
                self._loud[table] = self._loud.get(table, 0) + 1

    def loud_version(self, table: str) -> int:
        """Bumped by every commit that wrote `table` otherwise than QUIET."""
        with self._lock:
            return self._loud.get(table, 0)

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
        event.listen(factory, "after_commit", lambda s: self.bump(s.info.pop(_PENDING, ()), s.info.pop(_LOUD, ())))
        event.listen(factory, "after_rollback", _forget)
        event.listen(factory, "after_soft_rollback", lambda s, _previous: _forget(s))


def _pending(session: Session) -> set[str]:
    return session.info.setdefault(_PENDING, set())


def _loud(session: Session) -> set[str]:
    return session.info.setdefault(_LOUD, set())


def _after_flush(session: Session, _context: Any) -> None:
    pending, loud = _pending(session), _loud(session)
    for obj in (*session.new, *session.dirty, *session.deleted):
        table = getattr(obj, "__tablename__", None)
        if table:
            pending.add(table)
            loud.add(table)


def _do_orm_execute(state: ORMExecuteState) -> None:
    if state.is_insert or state.is_update or state.is_delete:
        table = getattr(state.statement, "table", None)
        name = getattr(table, "name", None)
        if name:
            _pending(state.session).add(name)
            if not state.execution_options.get("pedl_quiet"):
                _loud(state.session).add(name)


def _forget(session: Session) -> None:
    session.info.pop(_PENDING, None)
    session.info.pop(_LOUD, None)
