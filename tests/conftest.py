"""Shared fixtures: the database matrix (SQLite and PostgreSQL) and master configs."""
# ruff: noqa: E402 - collection is turned off before the imports below

from __future__ import annotations

import gc

# no cyclic garbage collection while pytest imports and collects the suite (~20% of a collection's CPU, and
# each of make test's pytest processes collects); after the collection (pytest_collection) it collects once,
# freezes what lives for the whole session (modules, test items) so that later full collections skip it, and
# turns it back on
gc.disable()

import functools
import os
import shutil

import pytest
from argon2 import PasswordHasher

from pedl.config.master_config import DatabaseConfig, MasterConfig
from pedl.master.db import migrate
from pedl.master.db.engine import Database
from pedl.master.identity import passwords
from pedl.master.workspaces import workspaces
from tests.support import shared_dirs
from tests.support.databases import (
    fresh_postgres_db,
    migrated_sqlite_template,
    open_postgres_connections,
    postgres_error,
)
from tests.support.docker import docker_daemon, test_image  # noqa: F401 - fixtures for task containers

_PG_ERROR: str | None = None


def pytest_sessionstart(session: pytest.Session) -> None:
    global _PG_ERROR
    _PG_ERROR = postgres_error()
    if _PG_ERROR and os.environ.get("CI"):
        pytest.exit(
            f"{_PG_ERROR}\nThe suite must run against PostgreSQL under CI. Start it with: "
            "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start",
            returncode=3,
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    shared_dirs.remove_session_base()  # the enterable directories of this process's tests (checkpoints)


@pytest.hookimpl(wrapper=True)
def pytest_collection(session: pytest.Session) -> object:
    """Around the collection, so that a pytest-xdist controller (which leaves collecting to its workers and
    never finishes a collection of its own) turns collection back on too."""
    try:
        return (yield)
    finally:
        gc.collect()
        gc.freeze()
        gc.enable()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    """After a PostgreSQL test's fixtures are gone: an engine nobody disposed of (an app never started or
    stopped while a pass still ran) keeps its connections open until a garbage collection finds it, and
    pytest-xdist's workers together then exceed PostgreSQL's max_connections (CI's run failed that way, with
    "too many clients" from then on). Such a test fails here, named."""
    result = yield
    if getattr(item, "callspec", None) is not None and item.callspec.params.get("db_kind") == "postgres":
        held = open_postgres_connections()
        if held:
            gc.collect()
            if (left := held - open_postgres_connections()) > 0:
                raise AssertionError(
                    f"{item.nodeid} left {left} PostgreSQL connection(s) open to the garbage "
                    "collector: dispose of the Database (or stop the app) it opened"
                )
    return result


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "slow: a test of tens of seconds or more that is neither e2e nor compat; pytest-xdist hands it out first",
    )


def _start_order(item: pytest.Item) -> int:
    if item.get_closest_marker("slow"):
        return 0
    return 1 if item.get_closest_marker("e2e") or item.get_closest_marker("compat") else 2


# make test's browser and serial passes collect only these paths (Makefile: BROWSER_TESTS, SERIAL_TESTS)
PASS_PATHS = {"browser": "tests/browser/", "serial": "tests/e2e/test_postgres_restart_e2e.py"}


def _outside_its_pass(items: list[pytest.Item]) -> list[str]:
    return [
        f"{item.nodeid} is marked {marker} but make test's {marker} pass collects only {path}"
        for item in items
        for marker, path in PASS_PATHS.items()
        if item.get_closest_marker(marker) and not item.nodeid.startswith(path)
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A browser or serial test outside the paths its pass collects would run in no pass: refused.
    Under pytest-xdist, hand out the long tests first (those marked slow, the longest, then the
    end-to-end ones), so that the short ones fill the workers at the end instead of one long test
    running alone while the others idle. (With xdist's default chunking the first worker would get
    all of them: make test passes --maxschedchunk 4.)"""
    if stray := _outside_its_pass(items):
        raise pytest.UsageError("\n".join(stray))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # workers collect; the controller only hands out indices
        items.sort(key=_start_order)


@pytest.fixture(autouse=True)
def _cheap_password_hashing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2 with production costs takes ~0.25 s of CPU per hash, and a master in this process
    hashes two default users' passwords and verifies them on start, and one per login; these tests
    are not about the key derivation, so use minimal costs (masters in processes of their own, as
    the e2e tests start them, take the lowest costs master.yaml allows: pedl.devcluster's default)."""
    monkeypatch.setattr(passwords, "_hasher", PasswordHasher(time_cost=1, memory_cost=64, parallelism=1))
    monkeypatch.setattr(passwords, "configure", lambda *_costs: None)  # create_app would set master.yaml's


def require_postgres() -> None:
    if _PG_ERROR:
        pytest.skip(_PG_ERROR)


@pytest.fixture(params=["sqlite", "postgres"])
def db_kind(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres":
        require_postgres()
    return request.param


@pytest.fixture(scope="session")
def shared_postgres_db():
    """One migrated PostgreSQL database for the session; tests empty it instead of creating their
    own (creating and migrating a database costs about a second, emptying one a few ms)."""
    with fresh_postgres_db() as db:
        config = MasterConfig(port=0, db=DatabaseConfig(**db))
        database = Database(config.database_url())
        migrate.upgrade(database.engine)
        database.dispose()
        yield db


@functools.cache
def _empty_postgres_sql() -> str:
    """One statement that empties every table and restarts every sequence, as TRUNCATE ... RESTART
    IDENTITY would, but by DELETE: TRUNCATE gives each of the 25 tables and their indexes new files
    (~0.1 s in all, per test), while a test leaves a few rows in a few tables. The ACCESS EXCLUSIVE
    locks, taken first, wait (as TRUNCATE's do) for anything a previous test left running on the
    database; children are deleted before their parents; setval(.., false) is a restarted sequence."""
    from pedl.master.db.models import Base

    tables = [f'"{t.name}"' for t in Base.metadata.sorted_tables]
    deletes = "".join(f"DELETE FROM {t}; " for t in reversed(tables))
    return (
        f"DO $$ BEGIN LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE; {deletes}"
        "PERFORM setval(format('%I.%I', schemaname, sequencename)::regclass, 1, false) FROM pg_sequences "
        "WHERE schemaname = current_schema() AND last_value IS NOT NULL; END $$"
    )


def _empty_postgres(db: dict) -> None:
    import psycopg

    from tests.support.databases import pg_admin_dsn

    with psycopg.connect(pg_admin_dsn(db["name"]), autocommit=True) as conn:
        conn.execute("SET lock_timeout = '20s'")
        conn.execute(_empty_postgres_sql())


@pytest.fixture
def master_config(db_kind: str, tmp_path, request: pytest.FixtureRequest) -> MasterConfig:
    """A master config on an empty database of the parametrized kind (already migrated to head)."""
    if db_kind == "sqlite":
        config = MasterConfig(data_dir=tmp_path / "master", port=0)
        config.data_dir.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(migrated_sqlite_template(), config.data_dir / "pedl.db")
        yield config
        return
    db = request.getfixturevalue("shared_postgres_db")
    _empty_postgres(db)
    yield MasterConfig(data_dir=tmp_path / "master", port=0, db=DatabaseConfig(**db))


@pytest.fixture
def isolated_master_config(db_kind: str, tmp_path) -> MasterConfig:
    """A master config on a database of its own, for tests that change the schema (migrations)."""
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
    # what migration 0007 seeds (Uncategorized): a shared PostgreSQL database is emptied between tests,
    # table by table, and a master puts it back at start; a test of the services has no master
    with db.session() as s:
        workspaces.ensure_defaults(s, 0.0)
        s.commit()
    yield db
    db.dispose()
