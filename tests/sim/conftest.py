"""Fixtures for the simulator tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.sim.scenarios import HEADER


@pytest.fixture
def write_trace(tmp_path: Path) -> Callable[..., Path]:
    """Write CSV rows (under the openb header unless another is given) and return the file."""

    def write(*rows: str, header: str = HEADER) -> Path:
        path = tmp_path / "trace.csv"
        path.write_text("\n".join([header, *rows]) + "\n")
        return path

    return write
