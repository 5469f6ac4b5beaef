"""Rows of a batch as a table inside one statement, on both databases: what goes in comes out
(None, floats, text with quotes and non-ASCII, JSON), an UPDATE ... FROM touches only the rows that
join and returns them, and a list parameter matches as IN would."""

from __future__ import annotations

import pytest
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.db.bulk_rows import (
    FLOAT,
    JSON_VALUE,
    TEXT,
    by_key,
    dialect_of,
    id_list,
    in_list,
    insert_rows,
    params,
    rows_table,
)
from pedl.master.lifecycle.states import AllocationState

A = AllocationState
ALLOC = models.Allocation.__table__
EVENT_COLUMNS = (
    ("entity_type", TEXT),
    ("entity_id", TEXT),
    ("time", FLOAT),
    ("from_state", TEXT),
    ("to_state", TEXT),
    ("level", TEXT),
    ("message", TEXT),
)


def pending(s: Session, *ids: str, pool: str = "default") -> None:
    s.add_all(
        models.Allocation(
            id=i,
            task_id=i,
            trial_id=None,
            name=i,
            state=A.PENDING,
            resource_pool=pool,
            slots_needed=1,
            priority=42,
            assignment=[],
            session_token_hash="",
            owner_id=1,
            queued_at=1.0,
        )
        for i in ids
    )
    s.flush()


def test_inserted_rows_read_back_as_they_were(s: Session) -> None:
    rows = [
        ("trial", "1", 1_700_000_000.123456, None, None, "info", 'it\'s "quoted", ünïcode ✓'),
        ("allocation", "1.1.1", 0.1 + 0.2, "STATE_PENDING", "STATE_ASSIGNED", "warning", ""),
    ]
    insert_rows(s, models.Event.__table__, EVENT_COLUMNS, rows)
    E = models.Event
    got = s.execute(
        select(E.entity_type, E.entity_id, E.time, E.from_state, E.to_state, E.level, E.message).order_by(E.id)
    ).all()
    assert [tuple(r) for r in got] == rows


def test_insert_of_no_rows_writes_nothing(s: Session) -> None:
    insert_rows(s, models.Event.__table__, EVENT_COLUMNS, [])
    assert s.scalars(select(models.Event)).all() == []


def test_an_update_from_the_rows_touches_and_returns_only_the_rows_that_join(s: Session) -> None:
    pending(s, "a", "b", "c")
    pending(s, "elsewhere", pool="other")
    pending(s, "taken")
    s.execute(update(ALLOC).where(ALLOC.c.id == "taken").values(state=A.ASSIGNED))  # no longer PENDING
    columns = (("id", TEXT), ("pool", TEXT), ("token", TEXT), ("assignment", JSON_VALUE))
    place = [{"agent_id": "x", "slot_ids": ["0", "1"], "port": 29400}]
    rows = [
        ("a", "default", "ta", place),
        ("elsewhere", "default", "te", []),
        ("gone", "default", "tg", []),
        ("taken", "default", "tt", []),
    ]
    dialect = dialect_of(s)
    still_pending = ((ALLOC.c.state, A.PENDING),)
    v = rows_table(dialect, columns, conditions=still_pending)
    stmt = (
        update(ALLOC)
        .where(
            ALLOC.c.id == v.c.id,
            ALLOC.c.resource_pool == v.c.pool,
            *by_key(ALLOC.c.id, dialect, *still_pending, rows=v),
        )
        .values(session_token_hash=v.c.token, assignment=v.c.assignment)
        .returning(ALLOC.c.id)
    )
    assert s.execute(stmt, params(dialect, columns, rows)).scalars().all() == ["a"]
    got = {r.id: (r.session_token_hash, r.assignment) for r in s.execute(select(models.Allocation)).scalars()}
    assert got == {"a": ("ta", place), "b": ("", []), "c": ("", []), "elsewhere": ("", []), "taken": ("", [])}


@pytest.mark.parametrize("ids", [[], ["b"], ["a", "c", "missing"]])
def test_in_list_matches_as_in_would(s: Session, ids: list[str]) -> None:
    pending(s, "a", "b", "c")
    dialect = dialect_of(s)
    query = select(ALLOC.c.id).where(in_list(ALLOC.c.id, dialect)).order_by(ALLOC.c.id)
    assert s.execute(query, {"ids": id_list(dialect, ids)}).scalars().all() == sorted(set(ids) - {"missing"})
