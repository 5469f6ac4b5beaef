"""`pedl master run` (config loading and overrides) and `pedl master info|config`."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.config.master_config import MasterConfig
from tests.cli.fake_master import FakeMaster


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[MasterConfig]:
    """Stand in for pedl.master.server so that `master run` returns with the config it built."""
    runs: list[MasterConfig] = []
    fake = types.ModuleType("pedl.master.server")
    fake.run_master = runs.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pedl.master.server", fake)
    return runs


def test_run_with_overrides(started: list[MasterConfig], tmp_path: Path) -> None:
    cfg = tmp_path / "master.yaml"
    cfg.write_text("port: 9000\ncluster_name: lab\nagent_heartbeat_interval: 2s\n")
    result = CliRunner().invoke(
        app, ["master", "run", "--config", str(cfg), "--port", "0", "--data-dir", str(tmp_path / "data")]
    )
    assert result.exit_code == 0, result.output
    (run,) = started
    assert run.port == 0 and run.data_dir == tmp_path / "data" and run.cluster_name == "lab"
    assert run.agent_heartbeat_interval == 2.0


def test_run_without_config_uses_defaults(started: list[MasterConfig]) -> None:
    result = CliRunner().invoke(app, ["master", "run"])
    assert result.exit_code == 0, result.output
    assert started[0].port == 8080


def test_config_errors_name_file_and_fields_and_exit_2(started: list[MasterConfig], tmp_path: Path) -> None:
    cfg = tmp_path / "master.yaml"
    cfg.write_text("port: -1\nbogus: true\n")
    result = CliRunner().invoke(app, ["master", "run", "--config", str(cfg)])
    assert result.exit_code == 2
    assert str(cfg) in result.output and "port" in result.output and "bogus: unknown key" in result.output
    assert started == []


def test_overrides_are_validated(started: list[MasterConfig]) -> None:
    result = CliRunner().invoke(app, ["master", "run", "--port", "70000"])
    assert result.exit_code == 2
    assert "command-line options" in result.output and "port" in result.output
    assert started == []


def test_missing_config_file(started: list[MasterConfig], tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["master", "run", "--config", str(tmp_path / "nope.yaml")])
    assert result.exit_code == 2
    assert "nope.yaml" in result.output


def test_info(cli, master: FakeMaster) -> None:
    body = {
        "version": "0.1.0",
        "masterId": "m-1",
        "clusterId": "c-1",
        "clusterName": "lab",
        "hasCustomLogo": False,
        "strictJobQueueControl": False,
    }
    master.route("GET", "/api/v1/master", body)
    result = cli("master", "info", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == body
    table = cli("master", "info")
    assert "Cluster ID" in table.stdout and "c-1" in table.stdout


def test_config(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/master/config", {"config": {"port": 8080, "log_level": "info"}})
    result = cli("master", "config")
    assert result.exit_code == 0, result.output
    assert "port: 8080" in result.stdout
