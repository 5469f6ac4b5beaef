"""Migration 0007 on a database in use: the default workspace and project come owned by admin, an
experiment that named a project that does not exist moves to project 1, and the id sequences go on
past the rows the migration inserted (on PostgreSQL)."""

from __future__ import annotations

from sqlalchemy import text

from pedl.config.master_config import MasterConfig
from pedl.master.db import migrate
from pedl.master.db.engine import Database


def test_an_existing_database_gets_the_defaults(isolated_master_config: MasterConfig) -> None:
    isolated_master_config.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(isolated_master_config.database_url())
    try:
        migrate.upgrade(db.engine, "0006")
        with db.engine.begin() as conn:
            for name in ("determined", "admin"):
                conn.execute(
                    text(
                        "INSERT INTO users (username, password_hash, admin, active, created_at, modified_at) "
                        "VALUES (:n, '', false, true, 10.0, 10.0)"
                    ),
                    {"n": name},
                )
            for project in (1, 99):  # pedl once accepted any projectId
                conn.execute(
                    text(
                        "INSERT INTO experiments (name, description, owner_id, state, config, original_config, "
                        "searcher_state, progress, resource_pool, start_time, archived, project_id, notes, labels) "
                        "VALUES ('e', '', 1, 'STATE_COMPLETED', '{}', '', '{}', 0, 'default', 1.0, false, :p, '', '')"
                    ),
                    {"p": project},
                )
        migrate.upgrade(db.engine)
        with db.engine.begin() as conn:
            admin = conn.execute(text("SELECT id FROM users WHERE username = 'admin'")).scalar_one()
            assert conn.execute(text("SELECT id, name, owner_id, immutable FROM workspaces")).all() == [
                (1, "Uncategorized", admin, True)
            ]
            assert conn.execute(text("SELECT id, workspace_id, name, owner_id FROM projects")).all() == [
                (1, 1, "Uncategorized", admin)
            ]
            assert conn.execute(text("SELECT project_id FROM experiments ORDER BY id")).scalars().all() == [1, 1]
            conn.execute(
                text(
                    "INSERT INTO workspaces (name, name_key, immutable, archived, created_at) "
                    "VALUES ('next', 'next', false, false, 1.0)"
                )
            )
            assert conn.execute(text("SELECT max(id) FROM workspaces")).scalar_one() == 2
        migrate.downgrade(db.engine, "0006")
        migrate.upgrade(db.engine)  # and again: the defaults come back once
        with db.engine.begin() as conn:
            assert conn.execute(text("SELECT count(*) FROM workspaces")).scalar_one() == 1
    finally:
        db.dispose()
