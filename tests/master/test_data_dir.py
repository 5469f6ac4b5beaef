"""The master's data_dir and SQLite files are its user's alone: the database holds shells' private keys,
notebook tokens and password hashes (it was 0644, readable by every task's user)."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

from pedl.config.master_config import MasterConfig
from pedl.master.app import open_database


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_new_data_dir_is_not_listable_and_its_database_owner_only(tmp_path: Path) -> None:
    data = tmp_path / "new" / "data"
    db = open_database(MasterConfig(data_dir=data))
    try:
        with db.session() as s:
            s.connection().exec_driver_sql("CREATE TABLE written_here (x INTEGER)")
        assert mode(data) == 0o711 and mode(data / "pedl.db") == 0o600
        assert [mode(data / f"pedl.db{suffix}") for suffix in ("-wal", "-shm")] == [0o600, 0o600]
    finally:
        db.engine.dispose()
        db.read_engine.dispose()


def test_an_older_masters_database_becomes_owner_only_and_its_directory_keeps_its_mode(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)  # the operator's
    with sqlite3.connect(data / "pedl.db") as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (x INTEGER)")
        for file in data.iterdir():
            os.chmod(file, 0o644)
        db = open_database(MasterConfig(data_dir=data))
        try:
            assert {f.name: mode(f) for f in data.iterdir()} == {
                "pedl.db": 0o600,
                "pedl.db-wal": 0o600,
                "pedl.db-shm": 0o600,
            }
            assert mode(data) == 0o755
        finally:
            db.engine.dispose()
            db.read_engine.dispose()
