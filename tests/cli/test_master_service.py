"""`pedl master install-service`: writes pedl-master.service and enables it with systemctl (here a
fake one on PATH that records its arguments); says clearly when systemctl is missing or fails."""

from __future__ import annotations

import configparser
import getpass
import os
import shlex
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.main import app

UNIT = "pedl-master.service"


@pytest.fixture
def master_yaml(tmp_path: Path) -> Path:
    path = tmp_path / "etc" / "master.yaml"
    path.parent.mkdir()
    path.write_text(f"port: 8080\ndata_dir: {tmp_path / 'data'}\n")
    return path


@pytest.fixture
def unit_dir(tmp_path: Path) -> Path:
    path = tmp_path / "units"
    path.mkdir()
    return path


def fake_systemctl(bin_dir: Path, *, fail_on: str = "") -> Path:
    """A `systemctl` that appends its arguments to bin_dir/calls, and fails (status 1) when they contain `fail_on`."""
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "systemctl"
    check = (
        f'case "$*" in *"{fail_on}"*) echo "Failed to {fail_on}: Access denied" >&2; exit 1;; esac\n' if fail_on else ""
    )
    script.write_text(f'#!/bin/sh\necho "$*" >> "{bin_dir / "calls"}"\n{check}exit 0\n')
    script.chmod(0o755)
    return bin_dir / "calls"


def install(*args: str):
    return CliRunner().invoke(app, ["master", "install-service", *args])


def read_unit(unit_dir: Path) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None)
    ini.optionxform = str
    ini.read_string((unit_dir / UNIT).read_text())
    return ini


def test_writes_the_unit_and_enables_it(
    master_yaml: Path, unit_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_systemctl(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    user = getpass.getuser()
    result = install("--config", str(master_yaml), "--unit-dir", str(unit_dir), "--user", user)
    assert result.exit_code == 0, result.output
    assert calls.read_text().splitlines() == ["daemon-reload", "enable --now pedl-master"]
    service = read_unit(unit_dir)["Service"]
    pedl = Path(sys.executable).parent / "pedl"  # this interpreter's pedl, by its absolute path
    assert shlex.split(service["ExecStart"]) == [str(pedl), "master", "run", "--config", str(master_yaml)]
    assert service["User"] == user
    assert oct((unit_dir / UNIT).stat().st_mode & 0o777) == oct(0o644)
    assert str(unit_dir / UNIT) in result.output and "journalctl -u pedl-master" in result.output


def test_relative_config_becomes_absolute_and_no_enable_runs_no_systemctl(
    master_yaml: Path, unit_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_systemctl(tmp_path / "bin")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.chdir(master_yaml.parent)
    result = install("--config", "master.yaml", "--unit-dir", str(unit_dir), "--no-enable")
    assert result.exit_code == 0, result.output
    assert not calls.exists()
    assert shlex.split(read_unit(unit_dir)["Service"]["ExecStart"])[-1] == str(master_yaml)
    assert "User" not in read_unit(unit_dir)["Service"]
    assert "systemctl enable --now pedl-master" in result.output


def test_without_config_takes_the_default_path(
    master_yaml: Path, unit_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PEDL_CONFIG_PATHS", f"{master_yaml.parent / 'absent.yaml'}{os.pathsep}{master_yaml}")
    result = install("--unit-dir", str(unit_dir), "--no-enable")
    assert result.exit_code == 0, result.output
    assert shlex.split(read_unit(unit_dir)["Service"]["ExecStart"])[-1] == str(master_yaml)
    monkeypatch.setenv("PEDL_CONFIG_PATHS", str(master_yaml.parent / "absent.yaml"))
    result = install("--unit-dir", str(unit_dir), "--no-enable")
    assert result.exit_code == 2 and "--config" in result.output and "absent.yaml" in result.output


def test_without_systemctl_the_unit_is_written_and_the_command_fails(
    master_yaml: Path, unit_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    result = install("--config", str(master_yaml), "--unit-dir", str(unit_dir))
    assert result.exit_code == 1
    assert "systemctl not found" in result.output and "not enabled" in result.output
    assert (unit_dir / UNIT).exists() and str(unit_dir / UNIT) in result.output


def test_a_failing_systemctl_is_reported_with_its_message(
    master_yaml: Path, unit_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = fake_systemctl(tmp_path / "bin", fail_on="enable")
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    result = install("--config", str(master_yaml), "--unit-dir", str(unit_dir))
    assert result.exit_code == 1
    assert "systemctl enable --now pedl-master" in result.output and "status 1" in result.output
    assert "Access denied" in result.output and (unit_dir / UNIT).exists()
    assert calls.read_text().splitlines() == ["daemon-reload", "enable --now pedl-master"]


def test_bad_input_is_refused_before_anything_is_written(master_yaml: Path, unit_dir: Path, tmp_path: Path) -> None:
    result = install("--config", str(master_yaml), "--unit-dir", str(unit_dir), "--user", "no-such-user-x9")
    assert result.exit_code == 1 and "--user" in result.output and "no-such-user-x9" in result.output
    result = install("--config", str(master_yaml), "--unit-dir", str(unit_dir), "--user", "bad\nname")
    assert result.exit_code == 1 and "not a valid user name" in result.output
    bad = tmp_path / "bad.yaml"
    bad.write_text("port: 99999\n")
    result = install("--config", str(bad), "--unit-dir", str(unit_dir), "--no-enable")
    assert result.exit_code == 2 and "port" in result.output and "check-config" in result.output
    result = install("--config", str(master_yaml), "--unit-dir", str(tmp_path / "nope"), "--no-enable")
    assert result.exit_code == 1 and "--unit-dir" in result.output
    assert list(unit_dir.iterdir()) == []
