"""Downgrades are refused: a database that a newer pedl migrated (a revision this pedl does not know)
stops the master at start with a message naming both revisions, on SQLite and PostgreSQL, and the
database is left as it was."""

from __future__ import annotations

import subprocess

import pytest
from sqlalchemy import text

from pedl.config.master_config import MasterConfig
from pedl.devcluster import pedl_command
from pedl.master.app import create_app
from pedl.master.db import migrate
from pedl.master.db.engine import Database

NEWER = "0042_from_a_newer_pedl"


def stamp(db: Database, revision: str) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = :rev"), {"rev": revision})


def test_revisions_of_a_new_and_a_migrated_database(isolated_master_config: MasterConfig) -> None:
    isolated_master_config.data_dir.mkdir(parents=True)
    db = Database(isolated_master_config.database_url())
    try:
        assert migrate.database_revisions(db.engine) == ()
        migrate.upgrade(db.engine)
        head = migrate.head_revision(db.engine)
        assert head is not None and migrate.database_revisions(db.engine) == (head,)
    finally:
        db.dispose()


def test_a_newer_database_is_refused_naming_both_revisions(isolated_master_config: MasterConfig) -> None:
    isolated_master_config.data_dir.mkdir(parents=True)
    db = Database(isolated_master_config.database_url())
    try:
        migrate.upgrade(db.engine)
        head = migrate.head_revision(db.engine)
        stamp(db, NEWER)
        with pytest.raises(migrate.DatabaseNewerThanMaster) as refused:
            migrate.upgrade(db.engine)
        message = refused.value.message
        assert NEWER in message and f"newest schema revision {head}" in message and "newer pedl" in message
        with pytest.raises(migrate.DatabaseNewerThanMaster):
            migrate.downgrade(db.engine, "base")
        with pytest.raises(migrate.DatabaseNewerThanMaster):  # the master's start
            create_app(isolated_master_config)
        assert migrate.database_revisions(db.engine) == (NEWER,)  # nothing was touched
    finally:
        db.dispose()


@pytest.mark.slow
def test_master_run_on_a_newer_database_exits_with_the_message(tmp_path) -> None:
    config = MasterConfig(data_dir=tmp_path / "data", port=0)
    config.data_dir.mkdir()
    db = Database(config.database_url())
    migrate.upgrade(db.engine)
    stamp(db, NEWER)
    db.dispose()
    (tmp_path / "master.yaml").write_text(f"port: 0\ndata_dir: {config.data_dir}\n")
    done = subprocess.run(
        [*pedl_command(), "master", "run", "--config", str(tmp_path / "master.yaml")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert f"the database is at schema revision {NEWER}" in done.stderr
    assert "Traceback" not in done.stderr
