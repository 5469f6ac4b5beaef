"""Fixtures for the master's API tests: an app on a fresh database of each kind, with a manual
clock, and a TestClient whose context runs the app's lifespan."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app
from tests.master.fakes import FakeAgent, bearer, login

# tests/master/api checks what each route answers on PostgreSQL, the production database, and on both databases
# only where its subject is what the database's SQL decides: which rows a listing, filter, sort, series or
# aggregate returns. Every route's SQL lives in the domain packages, whose tests (tests/master/<domain>) run on both;
# the CLI tests drive the same routes on SQLite, and schemathesis every operation on PostgreSQL. The master's routes
# are built once per process.
API_MODULES_ON_BOTH_DATABASES = frozenset(
    {
        "test_checkpoints",
        "test_trial_checkpoints",
        "test_experiment_listing",
        "test_trials",
        "test_trial_time_series",
        "test_metric_export",
        "test_metric_batches",
        "test_metric_reports",
        "test_model_registry",
        "test_project_columns",
        "test_jobs",
        "test_task_logs",
        "test_experiment_bulk",
        "test_projects",
        "test_workspaces",
    }
)


@pytest.hookimpl(tryfirst=True)  # before the markers are read: a parametrize marker replaces the fixture's params
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    module = metafunc.module.__name__
    if (
        "db_kind" in metafunc.fixturenames
        and module.startswith("tests.master.api.")
        and module.rpartition(".")[2] not in API_MODULES_ON_BOTH_DATABASES
    ):
        metafunc.definition.add_marker(pytest.mark.parametrize("db_kind", ["postgres"], indirect=True))


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(master_config: MasterConfig, clock: ManualClock) -> Iterator[FastAPI]:
    app = create_app(master_config, clock=clock)
    yield app
    # a client's lifespan disposes of it too; an app no client started (or one a test's own calls used
    # after the stop) would leave its connections to the garbage collector
    app.state.ctx.db.dispose()


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


@pytest.fixture
def admin(client: TestClient) -> dict[str, str]:
    """Headers of the default admin (blank password)."""
    return bearer(login(client, "admin"))


@pytest.fixture
def user(client: TestClient) -> dict[str, str]:
    """Headers of the default non-admin user `determined` (blank password)."""
    return bearer(login(client, "determined"))


@pytest.fixture
def agent(app: FastAPI, client: TestClient) -> Iterator[FakeAgent]:
    fake = FakeAgent(app, "agent-1", slots=1)
    yield fake
    fake.close()
