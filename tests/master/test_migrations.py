"""Alembic migrations on SQLite and PostgreSQL: empty -> head matches the models, head -> base
leaves nothing of pedl's, and back up again."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from pedl.config.master_config import MasterConfig
from pedl.master.db import migrate
from pedl.master.db.engine import Database
from pedl.master.db.models import Base

PEDL_TABLES = set(Base.metadata.tables)


def schema_differences(db: Database) -> list:
    with db.engine.connect() as conn:
        ctx = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": False})
        return compare_metadata(ctx, Base.metadata)


def current_revision(db: Database) -> str | None:
    with db.engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision(db: Database) -> str | None:
    return ScriptDirectory.from_config(migrate.alembic_config(db.engine)).get_current_head()


def tables(db: Database) -> set[str]:
    return set(inspect(db.engine).get_table_names())


def test_models_define_the_expected_tables() -> None:
    assert {
        "users",
        "user_sessions",
        "experiments",
        "trials",
        "allocations",
        "agents",
        "metrics",
        "checkpoints",
        "task_logs",
        "events",
        "model_definitions",
    } <= PEDL_TABLES


def test_upgrade_downgrade_upgrade(isolated_master_config: MasterConfig) -> None:
    isolated_master_config.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(isolated_master_config.database_url())
    try:
        assert tables(db) & PEDL_TABLES == set()  # really empty

        migrate.upgrade(db.engine)
        assert current_revision(db) == head_revision(db) is not None
        assert tables(db) >= PEDL_TABLES
        assert schema_differences(db) == []

        migrate.upgrade(db.engine)  # at head already: nothing to do, nothing breaks
        assert schema_differences(db) == []

        migrate.downgrade(db.engine, "base")
        assert tables(db) & PEDL_TABLES == set()
        assert current_revision(db) is None

        migrate.upgrade(db.engine)
        assert tables(db) >= PEDL_TABLES
        assert schema_differences(db) == []
        assert current_revision(db) == head_revision(db)
    finally:
        db.dispose()


def test_migrated_database_accepts_rows(database: Database) -> None:
    from pedl.master.db import models

    with database.session() as s:
        s.add(models.User(username="u", password_hash="x", admin=False, active=True, created_at=1.0, modified_at=1.0))
    with database.session() as s:
        user = s.query(models.User).one()
        assert user.id > 0 and user.username == "u"
