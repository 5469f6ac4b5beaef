"""SQLite never hands out an id twice: AUTOINCREMENT on the tables whose ids users see

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27 15:00:00.000000

SQLite gives an `INTEGER PRIMARY KEY` without AUTOINCREMENT the largest id + 1, so deleting the newest
experiment (or trial, model, version, project, workspace) freed its id for the next one, and a client
holding the old id (det, a WebUI tab, a script) silently reached the new row. PostgreSQL's sequences
and Determined never reuse an id. SQLite can only add AUTOINCREMENT by rebuilding the table: each table
is copied into a new one, ids and all, and the largest id copied becomes the floor of its sequence.
The rebuild runs with foreign keys off (env.py): dropping the old table would otherwise delete its
children through ON DELETE CASCADE. PostgreSQL is unchanged.
"""

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# parents first is not needed with foreign keys off; the order is only for the reader
TABLES = ("users", "workspaces", "projects", "experiments", "trials", "registered_models", "model_versions")


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != "sqlite":
        return
    for table in TABLES:
        with op.batch_alter_table(table, recreate="always", table_kwargs={"sqlite_autoincrement": autoincrement}):
            pass


def upgrade() -> None:
    _rebuild(True)


def downgrade() -> None:
    _rebuild(False)
