"""Fixtures for the cluster modules' unit tests: a real database of each kind and recording effects."""

from __future__ import annotations

import pytest

from pedl.config.master_config import MasterConfig
from tests.master.cluster.recording_effects import RecordingEffects


@pytest.fixture
def fx(master_config: MasterConfig) -> RecordingEffects:
    return RecordingEffects(config=master_config)
