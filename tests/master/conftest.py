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


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def app(master_config: MasterConfig, clock: ManualClock) -> FastAPI:
    return create_app(master_config, clock=clock)


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
