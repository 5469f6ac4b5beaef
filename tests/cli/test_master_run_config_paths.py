"""`pedl master run` without --config: the first of /usr/local/pedl/etc/master.yaml and
/etc/pedl/master.yaml that exists (PEDL_CONFIG_PATHS replaces the list here), else the defaults;
it says which."""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.config.master_config import MasterConfig
from pedl.config.master_config_paths import CONFIG_PATHS_ENV, config_search_paths, find_master_config


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[MasterConfig]:
    """Stand in for pedl.master.server so that `master run` returns with the config it built."""
    runs: list[MasterConfig] = []
    fake = types.ModuleType("pedl.master.server")
    fake.run_master = runs.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pedl.master.server", fake)
    return runs


def config_file(path: Path, cluster_name: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"cluster_name: {cluster_name}\nport: 0\n")
    return path


def search(monkeypatch: pytest.MonkeyPatch, *paths: Path) -> None:
    monkeypatch.setenv(CONFIG_PATHS_ENV, os.pathsep.join(str(p) for p in paths))


def run(*args: str):
    return CliRunner().invoke(app, ["master", "run", *args])


def test_the_default_search_is_the_seeds_path_then_etc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(CONFIG_PATHS_ENV, raising=False)
    assert config_search_paths() == [Path("/usr/local/pedl/etc/master.yaml"), Path("/etc/pedl/master.yaml")]


def test_the_first_existing_file_is_used_and_named(
    started: list[MasterConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "usr-local" / "master.yaml", tmp_path / "etc" / "master.yaml"
    config_file(second, "from-etc")
    search(monkeypatch, first, second)
    result = run()
    assert result.exit_code == 0, result.output
    assert started[-1].cluster_name == "from-etc" and f"config: {second}" in result.output
    config_file(first, "from-usr-local")
    result = run()
    assert started[-1].cluster_name == "from-usr-local" and f"config: {first}" in result.output
    assert find_master_config() == first


def test_no_file_runs_on_the_defaults_and_says_so(
    started: list[MasterConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    search(monkeypatch, tmp_path / "a.yaml", tmp_path / "b.yaml")
    result = run()
    assert result.exit_code == 0, result.output
    assert started[0].port == 8080 and started[0].cluster_name == ""
    assert (
        "no config file at" in result.output
        and "a.yaml" in result.output
        and "running on the defaults" in result.output
    )


def test_config_option_wins_over_the_search(
    started: list[MasterConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    search(monkeypatch, config_file(tmp_path / "found.yaml", "found"))
    given = config_file(tmp_path / "given.yaml", "given")
    result = run("--config", str(given))
    assert result.exit_code == 0, result.output
    assert started[0].cluster_name == "given"


def test_an_invalid_found_file_is_an_error_naming_it(
    started: list[MasterConfig], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = tmp_path / "master.yaml"
    bad.write_text("bogus: 1\n")
    search(monkeypatch, bad)
    result = run()
    assert result.exit_code == 2 and str(bad) in result.output and "bogus: unknown key" in result.output
    assert started == []
