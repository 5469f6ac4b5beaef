"""Workspaces: the defaults every database has (and gets back when they went missing), names."""

from __future__ import annotations

import pytest
from sqlalchemy import delete, select

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.workspaces.workspaces import DEFAULT_NAME, checked_name, ensure_defaults, is_descending, name_key


def test_the_migration_makes_the_default_workspace_and_project(database: Database) -> None:
    with database.session() as s:
        ensure_defaults(s, 5.0)  # the test database may have been emptied table by table
    with database.session() as s:
        ws, project = s.get(models.Workspace, 1), s.get(models.Project, 1)
        assert (ws.name, ws.immutable, project.name, project.workspace_id, project.immutable) == (
            DEFAULT_NAME,
            True,
            DEFAULT_NAME,
            1,
            True,
        )


def test_defaults_come_back_owned_by_admin_and_new_rows_take_the_next_ids(database: Database) -> None:
    with database.session() as s:
        for table in (models.Project, models.Workspace):
            s.execute(delete(table))
        s.add(models.User(username="admin", password_hash="", created_at=0.0, modified_at=0.0))
    with database.session() as s:
        ensure_defaults(s, 5.0)
    with database.session() as s:
        admin = s.scalar(select(models.User.id).where(models.User.username == "admin"))
        assert s.get(models.Workspace, 1).owner_id == admin and s.get(models.Project, 1).owner_id == admin
        ws = models.Workspace(name="next", name_key="next", owner_id=admin, created_at=6.0)
        s.add(ws)
        s.flush()
        assert ws.id == 2  # on PostgreSQL too: the sequence went past the row inserted by hand
    with database.session() as s:
        ensure_defaults(s, 7.0)  # nothing to do the second time
        assert len(s.scalars(select(models.Workspace)).all()) == 2


def test_an_owner_is_filled_in_once_admin_exists(database: Database) -> None:
    with database.session() as s:
        ensure_defaults(s, 5.0)
        s.get(models.Workspace, 1).owner_id = None
        s.get(models.Project, 1).owner_id = None
        s.add(models.User(username="admin", password_hash="", created_at=0.0, modified_at=0.0))
    with database.session() as s:
        ensure_defaults(s, 6.0)
    with database.session() as s:
        admin = s.scalar(select(models.User.id).where(models.User.username == "admin"))
        assert s.get(models.Workspace, 1).owner_id == admin == s.get(models.Project, 1).owner_id


@pytest.mark.parametrize(
    ("name", "problem"),
    [("", "empty"), ("  ", "empty"), ("x" * 256, "255"), ("a\nb", "control"), ("a\x7fb", "control")],
)
def test_bad_names_are_refused_naming_the_field(name: str, problem: str) -> None:
    with pytest.raises(InvalidArgument, match=problem) as refused:
        checked_name(name, "name")
    assert refused.value.fields == [{"field": "name", "message": refused.value.fields[0]["message"]}]


def test_names_compare_whatever_their_case() -> None:
    assert name_key("Straße") == name_key("STRASSE") and name_key("Ws") == name_key("wS")
    assert checked_name("x" * 255, "name") == "x" * 255


def test_order_by() -> None:
    assert is_descending("ORDER_BY_DESC") and not is_descending(None) and not is_descending("ORDER_BY_ASC")
    with pytest.raises(InvalidArgument, match="orderBy"):
        is_descending("DESC")
