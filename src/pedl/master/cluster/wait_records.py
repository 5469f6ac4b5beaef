"""Storing why pending allocations wait, for a batch in two statements: the reasons (only on rows
still PENDING in the pool and with the reason kind they were decided from) and, for a new kind, a
trial event (cluster/wait_reasons.py words the reasons; placement.py decides them)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

from sqlalchemy import bindparam, update
from sqlalchemy.orm import Session
from sqlalchemy.sql import Executable

from pedl.master.db import models
from pedl.master.db.base import table_of
from pedl.master.db.bulk_rows import FLOAT, INTEGER, TEXT, by_key, dialect_of, insert_rows, params, rows_table
from pedl.master.lifecycle.states import AllocationState

ALLOC = table_of(models.Allocation)
EVENT = table_of(models.Event)
EVENT_COLUMNS = (
    ("entity_type", TEXT),
    ("entity_id", TEXT),
    ("time", FLOAT),
    ("from_state", TEXT),
    ("to_state", TEXT),
    ("level", TEXT),
    ("message", TEXT),
)
WAIT_COLUMNS = (("id", TEXT), ("pool", TEXT), ("seen", TEXT), ("kind", TEXT), ("text", TEXT), ("trial_id", INTEGER))


class WaitUpdate(NamedTuple):
    """A pending allocation's new wait reason."""

    allocation_id: str
    pool: str
    trial_id: int | None
    seen_kind: str | None  # the kind it had when decided: written only while the row still has it
    kind: str
    text: str
    event_level: str | None  # the kind changed: a trial event at this level ("waiting: <text>")


def store(s: Session, now: float, waits: Sequence[WaitUpdate]) -> set[str]:
    """Write the reasons that still apply; returns the allocations written."""
    if not waits:
        return set()
    dialect = dialect_of(s)
    rows = [(w.allocation_id, w.pool, w.seen_kind, str(w.kind), w.text, w.trial_id) for w in waits]
    written = set(s.execute(_update(dialect), params(dialect, WAIT_COLUMNS, rows, now=now)).scalars())
    insert_rows(
        s,
        EVENT,
        EVENT_COLUMNS,
        [
            ("trial", str(w.trial_id), now, None, None, w.event_level, f"waiting: {w.text}")
            for w in waits
            if w.allocation_id in written and w.event_level and w.trial_id is not None
        ],
    )
    return written


@functools.cache
def _update(dialect: str) -> Executable:
    pending = ((ALLOC.c.state, AllocationState.PENDING),)
    v = rows_table(dialect, WAIT_COLUMNS, conditions=pending)
    return (
        update(ALLOC)
        .where(
            ALLOC.c.id == v.c.id,
            ALLOC.c.resource_pool == v.c.pool,
            ALLOC.c.wait_kind.is_not_distinct_from(v.c.seen),
            *by_key(ALLOC.c.id, dialect, *pending, rows=v),
        )
        .values(wait_kind=v.c.kind, wait_reason=v.c.text, wait_since=bindparam("now"))
        .returning(ALLOC.c.id)
    )
