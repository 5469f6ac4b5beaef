"""Fixtures for the cluster modules' unit tests: a real database of each kind, a session on it,
recording effects, and a private event loop for agent connections."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.db.engine import Database
from tests.master.lifecycle.recording_effects import RecordingEffects


@pytest.fixture
def fx(master_config: MasterConfig) -> RecordingEffects:
    return RecordingEffects(config=master_config)


@pytest.fixture
def s(database: Database) -> Iterator[Session]:
    with database.session() as session:
        yield session


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    """Not running: AgentConnections only queue their messages on it."""
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()
