"""The master's systemd unit: read back as INI, it runs `pedl master run --config FILE` from an
absolute path, restarts on failure, logs to the journal, and stops the master alone with SIGTERM."""

from __future__ import annotations

import configparser
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from pedl.master.systemd_unit import CONFIG_EXIT_STATUS, UNIT_NAME, check_user_name, master_unit, quote_exec_arg

PEDL = ["/opt/pedl/venv/bin/pedl"]


def parse(unit: str) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None, strict=True)  # strict: no key or section twice
    ini.optionxform = str  # systemd keys are case-sensitive
    ini.read_string(unit)
    return ini


def test_unit_runs_the_master_with_its_config_as_a_restarting_journal_service() -> None:
    ini = parse(master_unit(PEDL, "/usr/local/pedl/etc/master.yaml", version="1.2.3"))
    assert ini.sections() == ["Unit", "Service", "Install"]
    service = ini["Service"]
    assert shlex.split(service["ExecStart"]) == [*PEDL, "master", "run", "--config", "/usr/local/pedl/etc/master.yaml"]
    assert service["Restart"] == "on-failure"
    assert service["LimitNOFILE"] == "65536"  # the master's connection caps fit under its open-file limit
    assert service["RestartPreventExitStatus"] == "2"  # a bad config: restarting would not help
    assert service["StandardOutput"] == service["StandardError"] == "journal"
    assert service["KillSignal"] == "SIGTERM"
    assert service["KillMode"] == "process"  # agents and trials the master started are left running
    assert int(service["TimeoutStopSec"]) > 5  # more than the master's own graceful shutdown
    assert "User" not in service
    assert "network-online.target" in ini["Unit"]["After"]
    assert ini["Install"]["WantedBy"] == "multi-user.target"
    assert "pedl 1.2.3" in master_unit(PEDL, "/etc/pedl/master.yaml", version="1.2.3").splitlines()[0]


def test_restart_is_not_retried_on_the_exit_status_of_a_config_error() -> None:
    from pedl.cli.master import CONFIG_EXIT  # `pedl master run`'s status for an invalid config

    assert CONFIG_EXIT_STATUS == CONFIG_EXIT


def test_user_is_set_when_given() -> None:
    assert parse(master_unit(PEDL, "/etc/pedl/master.yaml", user="pedl"))["Service"]["User"] == "pedl"


@pytest.mark.parametrize("user", ["", "root\nExecStartPre=/bin/evil", "-rf", "1abc", "a b", "x" * 40])
def test_bad_user_names_are_refused(user: str) -> None:
    with pytest.raises(ValueError, match="not a valid user name"):
        check_user_name(user)
    with pytest.raises(ValueError):
        master_unit(PEDL, "/etc/pedl/master.yaml", user=user)


def test_odd_paths_are_quoted_and_escaped_for_systemd() -> None:
    assert quote_exec_arg("/usr/local/pedl/etc/master.yaml") == "/usr/local/pedl/etc/master.yaml"
    assert quote_exec_arg("/srv/my configs/master.yaml") == '"/srv/my configs/master.yaml"'
    assert quote_exec_arg("/srv/100%/m.yaml") == "/srv/100%%/m.yaml"  # % starts a systemd specifier
    assert quote_exec_arg('/srv/$HOME/"x".yaml') == '"/srv/$$HOME/\\"x\\".yaml"'  # $ would expand a variable
    for bad in ("", "/a\nb", "/a\x00b"):
        with pytest.raises(ValueError):
            quote_exec_arg(bad)


@pytest.mark.parametrize(("pedl", "config"), [(["pedl"], "/etc/pedl/master.yaml"), (PEDL, "master.yaml")])
def test_relative_paths_are_refused(pedl: list[str], config: str) -> None:
    with pytest.raises(ValueError, match="absolute"):
        master_unit(pedl, config)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
def test_systemd_accepts_the_unit(tmp_path: Path) -> None:
    """systemd's own parser reads the unit without a warning (it names the file in each one)."""
    pedl = tmp_path / "bin" / "pedl"
    pedl.parent.mkdir()
    pedl.write_text("#!/bin/sh\n")
    pedl.chmod(0o755)
    unit = tmp_path / UNIT_NAME
    unit.write_text(master_unit([str(pedl)], str(tmp_path / "my config" / "master.yaml"), user="root"))
    done = subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)
    assert UNIT_NAME not in done.stdout + done.stderr, done.stdout + done.stderr
    assert done.returncode == 0
