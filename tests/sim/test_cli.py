"""`pedl sim`: JSON keys per policy, the table, the config file, and errors that name the option."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from pedl.cli.main import app
from tests.sim.scenarios import csv_row
from tests.sim.test_simulation import KEYS


def sim(*args: str):
    return CliRunner().invoke(app, ["sim", *args])


def small_trace(write_trace) -> Path:
    return write_trace(csv_row("a", 1, 0, 3600, 0), csv_row("b", 2, 600, 4200, 600), csv_row("c", 1, 0, 50, ""))


def test_json_has_the_figures_of_each_policy(write_trace) -> None:
    result = sim("--trace", str(small_trace(write_trace)), "--json", "--boot-delay", "0s", "--idle", "0s")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert set(data["policies"]) == {"pedl", "determined"}
    for figures in data["policies"].values():
        assert set(figures) >= KEYS
        assert figures["jobs"] == 2 and figures["jobs_never_fit"] == 0
    assert data["trace"]["skipped_missing_times"] == 1
    assert data["cloud"]["boot_delay"] == 0.0 and data["pool"]["max_idle_s"] == 0.0


def test_one_policy_and_several_types(write_trace) -> None:
    result = sim(
        "--trace",
        str(small_trace(write_trace)),
        "--json",
        "--policy",
        "pedl",
        "--instance-type",
        "g5.xlarge",
        "--instance-type",
        "p3.8xlarge",
        "--spot",
        "--seed",
        "3",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert list(data["policies"]) == ["pedl"]
    assert data["policies"]["pedl"]["instance_types"] == ["g5.xlarge", "p3.8xlarge"]
    assert data["pool"]["spot"] is True and "interruptions" in data["policies"]["pedl"]


def test_the_table(write_trace) -> None:
    result = sim("--trace", str(small_trace(write_trace)))
    assert result.exit_code == 0, result.output
    for text in (
        "instance-hours",
        "lower bound",
        "queue p95",
        "spot interruptions",
        "pedl",
        "determined",
        "0-GPU job(s) left out",
    ):
        assert text in result.stdout


def test_pool_settings_from_a_config(write_trace, tmp_path: Path) -> None:
    config = tmp_path / "master.yaml"
    config.write_text(
        "resource_pools:\n  - pool_name: default\n    provider: {type: aws, image_id: ami-1, "
        "ssh_key_name: k, instance_type: g5.12xlarge, max_instances: 3, max_idle_agent_period: 2m}\n"
    )
    result = sim("--trace", str(small_trace(write_trace)), "--config", str(config), "--json", "--max-instances", "4")
    assert result.exit_code == 0, result.output
    pool = json.loads(result.stdout)["pool"]
    assert pool["instance_types"][0]["name"] == "g5.12xlarge"
    assert pool["max_idle_s"] == 120.0 and pool["max_instances"] == 4


def test_errors_name_the_option(write_trace, tmp_path: Path) -> None:
    trace = str(small_trace(write_trace))
    cases = [
        (["--trace", trace, "--instance-type", "x1.nope"], "--instance-type: unknown instance type 'x1.nope'"),
        (["--trace", trace, "--window", "10d-20d"], "--window: malformed '10d-20d'"),
        (["--trace", str(tmp_path / "missing.csv")], "--trace: no such file"),
        (["--trace", trace, "--idle", "5 minutes"], "--idle: invalid duration"),
        (["--trace", trace, "--spot-price", "1.5"], "--spot-price: 1.5 is not between 0 and 1"),
        (["--trace", trace, "--policy", "k8s"], "--policy: 'k8s' is not one of"),
        (["--trace", trace, "--config", str(tmp_path / "none.yaml")], "--config: cannot read"),
    ]
    for args, message in cases:
        result = sim(*args)
        assert result.exit_code == 1, (args, result.output)
        assert message in result.output, (args, result.output)
        assert "Traceback" not in result.output
    bad = tmp_path / "bad.csv"
    bad.write_text("name,num_gpu\nx,1\n")
    result = sim("--trace", str(bad))
    assert result.exit_code == 1 and "lacks required column(s) creation_time" in result.output
