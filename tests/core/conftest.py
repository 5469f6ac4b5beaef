"""Fixtures: a fake master, and DET_* environments for cluster-mode and local-mode tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from .fake_master import FakeMaster, task_env


@pytest.fixture
def fake_master() -> Iterator[FakeMaster]:
    master = FakeMaster().start()
    yield master
    master.stop()


@pytest.fixture
def off_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make sure no DET_* variable of an enclosing task leaks into a local-mode test."""
    for name in list(os.environ):
        if name.startswith("DET_"):
            monkeypatch.delenv(name)


@pytest.fixture
def on_cluster(monkeypatch: pytest.MonkeyPatch, fake_master: FakeMaster, tmp_path: Path, off_cluster: None) -> Path:
    """DET_* variables pointing at the fake master; returns the checkpoint host_path."""
    host_path = tmp_path / "shared"
    for name, value in task_env(fake_master.url, host_path).items():
        monkeypatch.setenv(name, value)
    return host_path
