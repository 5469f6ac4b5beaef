"""Shared fixtures: the database matrix (SQLite and PostgreSQL) and master configs."""

from __future__ import annotations

import os

import pytest

from pedl.config.master_config import DatabaseConfig, MasterConfig
from pedl.master.db import migrate
from pedl.master.db.engine import Database
from tests.support.databases import fresh_postgres_db, postgres_error

_PG_ERROR: str | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _PG_ERROR
    _PG_ERROR = postgres_error()
    if _PG_ERROR and os.environ.get("CI"):
        pytest.exit(f"{_PG_ERROR}\nThe suite must run against PostgreSQL under CI. Start it with: "
                    "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start", returncode=3)


def require_postgres() -> None:
    if _PG_ERROR:
        pytest.skip(_PG_ERROR)


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        require_postgres()
    return request.param


@pytest.fixture
def master_config(db_kind: str, tmp_path) -> MasterConfig:
    """A master config on a fresh database of the parametrized kind."""
    if db_kind == "sqlite":
        yield MasterConfig(data_dir=tmp_path / "master", port=0)
        return
    with fresh_postgres_db() as db:
        yield MasterConfig(data_dir=tmp_path / "master", port=0, db=DatabaseConfig(**db))


@pytest.fixture
def database(master_config: MasterConfig) -> Database:
    master_config.data_dir.mkdir(parents=True, exist_ok=True)
    db = Database(master_config.database_url())
    migrate.upgrade(db.engine)
    yield db
    db.dispose()
