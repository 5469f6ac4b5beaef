"""Fixtures for the CLI tests: an isolated config directory, a fake master, a CLI runner."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from pedl.cli.main import app
from tests.cli.fake_master import FakeMaster
from tests.cli.ntsc_live import live  # noqa: F401 - a real master app for commands, notebooks, shells...


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    config_dir = tmp_path / "pedl-config"
    monkeypatch.setenv("PEDL_CONFIG_DIR", str(config_dir))
    for name in ("PEDL_MASTER", "DET_MASTER", "PEDL_USER", "PEDL_MAX_MODEL_DEF_BYTES", "PEDL_AGENT_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("PEDL_CONFIG_PATHS", "")  # `master run` must not find a master.yaml of this machine
    monkeypatch.setattr("pedl.cli.experiment_watch.FOLLOW_INTERVAL", 0.01)
    return config_dir


@pytest.fixture
def db_kind() -> str:
    """The CLI tests against a real master app check what the CLI sends and shows: SQLite only. What
    the master stores, on both databases, is checked by tests/master against the same routes."""
    return "sqlite"


@pytest.fixture
def master() -> Iterator[FakeMaster]:
    fake = FakeMaster().start()
    yield fake
    fake.stop()


@pytest.fixture
def cli(master: FakeMaster) -> Callable[..., Result]:
    """Run `pedl -m <fake master> ARGS...`."""
    runner = CliRunner()

    def run(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, ["-m", master.url, *args], input=input)

    return run
