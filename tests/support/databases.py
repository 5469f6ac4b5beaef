"""Test databases: a fresh SQLite file or a fresh PostgreSQL database per test."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

PG_HOST = os.environ.get("PEDL_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("PEDL_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("PEDL_TEST_PG_USER", "postgres")
PG_PASSWORD = os.environ.get("PEDL_TEST_PG_PASSWORD", "")


def pg_admin_dsn(dbname: str = "postgres") -> str:
    from psycopg.conninfo import make_conninfo  # quotes empty and special values correctly

    return make_conninfo(
        host=PG_HOST, port=PG_PORT, user=PG_USER, password=PG_PASSWORD, dbname=dbname, connect_timeout=3
    )


def postgres_error() -> str | None:
    """None when PostgreSQL answers, else why not."""
    try:
        with psycopg.connect(pg_admin_dsn(), autocommit=True) as conn:
            conn.execute("select 1")
        return None
    except Exception as exc:
        return f"PostgreSQL is unreachable at {PG_HOST}:{PG_PORT} as {PG_USER}: {exc}".strip()


def open_postgres_connections() -> int:
    """How many TCP connections this process holds open to PostgreSQL (its sockets, matched in /proc's table
    of the network namespace's connections)."""
    sockets = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            sockets.add(target[8:-1])
    port, held = f":{PG_PORT:04X}", 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()  # sl, local, remote, state (01: established), ..., inode (10th)
                held += fields[2].endswith(port) and fields[3] == "01" and fields[9] in sockets
    return held


@contextmanager
def fresh_postgres_db() -> Iterator[dict]:
    """Create a database for one test and drop it afterwards; yields master.yaml `db:` fields."""
    name = f"pedl_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_admin_dsn(), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield {
            "host": PG_HOST,
            "port": PG_PORT,
            "user": PG_USER,
            "password": PG_PASSWORD,
            "name": name,
            "ssl_mode": "disable",
        }
    finally:
        with psycopg.connect(pg_admin_dsn(), autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


_SQLITE_TEMPLATE: Path | None = None


def migrated_sqlite_template() -> Path:
    """A SQLite database migrated to head, made once per process, for tests to copy: migrating one costs
    a dozen committed DDL transactions (an fsync each, most of a second on a busy disk), a copy a millisecond."""
    global _SQLITE_TEMPLATE
    if _SQLITE_TEMPLATE is None or not _SQLITE_TEMPLATE.exists():
        from pedl.master.db import migrate
        from pedl.master.db.engine import Database

        path = Path(tempfile.mkdtemp(prefix="pedl-sqlite-template-")) / "pedl.db"
        database = Database(f"sqlite:///{path}")
        migrate.upgrade(database.engine)
        database.dispose()
        _SQLITE_TEMPLATE = path
    return _SQLITE_TEMPLATE
