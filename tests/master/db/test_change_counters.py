"""The per-table change counters: a committed write bumps the tables it wrote, by ORM or by a DML
statement; a rollback or a read bumps nothing; a new master (boot) never matches an old tag."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, insert, select, update

from pedl.master.db import models
from pedl.master.db.change_counters import QUIET, ChangeCounters
from pedl.master.db.engine import Database


def _user(name: str) -> models.User:
    return models.User(username=name, admin=False, active=True, password_hash="", created_at=0.0, modified_at=0.0)


def test_orm_writes_bump_their_table_at_commit(database: Database) -> None:
    before = database.changes.versions(["users", "experiments"])
    with database.session() as s:
        s.add(_user("counted"))
        s.flush()
        assert database.changes.versions(["users"]) == before[:1]  # not before the commit
    after = database.changes.versions(["users", "experiments"])
    assert after[0] == before[0] + 1 and after[1] == before[1]


def test_dml_statements_bump_their_table(database: Database) -> None:
    with database.session() as s:
        s.add(_user("dml"))
    for stmt in (
        update(models.User).where(models.User.username == "dml").values(display_name="D"),
        delete(models.User).where(models.User.username == "dml"),
    ):
        (before,) = database.changes.versions(["users"])
        with database.session() as s:
            s.execute(stmt)
        assert database.changes.versions(["users"]) == (before + 1,)
    (before,) = database.changes.versions(["users"])
    with database.session() as s:
        s.execute(
            insert(models.User).values(
                username="core", admin=False, active=True, password_hash="", created_at=0.0, modified_at=0.0
            )
        )
    assert database.changes.versions(["users"]) == (before + 1,)


def test_a_rollback_and_a_read_bump_nothing(database: Database) -> None:
    before = database.changes.versions(["users"])
    with pytest.raises(RuntimeError), database.session() as s:
        s.add(_user("rolled-back"))
        s.flush()
        raise RuntimeError("abort")
    with database.session() as s:
        s.scalars(select(models.User)).all()
    with database.read_session() as s:
        s.scalars(select(models.User)).all()
    assert database.changes.versions(["users"]) == before


def test_quiet_writes_bump_the_version_but_not_the_loud_version(database: Database) -> None:
    with database.session() as s:
        s.add(_user("quiet"))
    quiet = update(models.User).where(models.User.username == "quiet").values(display_name="Q")
    (version,), loud = database.changes.versions(["users"]), database.changes.loud_version("users")
    with database.session() as s:
        s.execute(quiet, execution_options=QUIET)
    assert (database.changes.versions(["users"]), database.changes.loud_version("users")) == ((version + 1,), loud)
    with database.session() as s:  # any other write in the same transaction makes it loud
        s.execute(quiet, execution_options=QUIET)
        s.get(models.User, s.scalar(select(models.User.id).where(models.User.username == "quiet"))).active = False
    assert (database.changes.versions(["users"]), database.changes.loud_version("users")) == ((version + 2,), loud + 1)
    with database.session() as s:
        s.execute(quiet.values(display_name="R"))
    assert database.changes.loud_version("users") == loud + 2
    with pytest.raises(RuntimeError), database.session() as s:
        s.execute(quiet.values(display_name="S"))
        raise RuntimeError("abort")
    assert database.changes.loud_version("users") == loud + 2


def test_tags_follow_the_tables_the_caller_and_the_boot() -> None:
    one, other = ChangeCounters(), ChangeCounters()
    tag = one.tag(["a", "b"], 7)
    assert tag == one.tag(["a", "b"], 7) and tag.startswith('W/"')
    assert one.tag(["a", "b"], 8) != tag  # another caller
    assert other.tag(["a", "b"], 7) != tag  # another boot
    one.bump(["c"])
    assert one.tag(["a", "b"], 7) == tag
    one.bump(["b"])
    assert one.tag(["a", "b"], 7) != tag
