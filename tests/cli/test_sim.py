"""`pedl sim TRACE`: the trace as an argument or with --trace, and a pool line that does not wrap
at 80 columns (the figures are tested in tests/sim/test_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from tests.sim.scenarios import HEADER, csv_row


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "trace.csv"
    path.write_text("\n".join([HEADER, csv_row("a", 1, 0, 3600, 0), csv_row("b", 2, 600, 4200, 600)]) + "\n")
    return path


def sim(*args: str, columns: int = 200):
    return CliRunner().invoke(app, ["sim", *args], env={"COLUMNS": str(columns)})


def test_the_trace_as_an_argument_or_an_option(trace: Path) -> None:
    as_argument = sim(str(trace), "--json", "--policy", "pedl")
    assert as_argument.exit_code == 0, as_argument.output
    as_option = sim("--trace", str(trace), "--json", "--policy", "pedl")
    assert as_option.exit_code == 0, as_option.output
    figures = [json.loads(r.stdout)["policies"]["pedl"] for r in (as_argument, as_option)]
    assert figures[0]["jobs"] == figures[1]["jobs"] == 2


def test_no_trace_two_traces_and_a_missing_one(trace: Path, tmp_path: Path) -> None:
    missing = sim()
    assert missing.exit_code == 1 and "missing the trace: pedl sim TRACE.csv" in missing.output
    both = sim(str(trace), "--trace", str(tmp_path / "other.csv"))
    assert both.exit_code == 1 and "two traces given" in both.output
    assert sim(str(trace), "--trace", str(trace)).exit_code == 0
    gone = sim(str(tmp_path / "gone.csv"))
    assert gone.exit_code == 1 and "TRACE: no such file" in gone.output


def test_the_pool_line_does_not_wrap_at_80_columns(trace: Path) -> None:
    result = sim(
        str(trace),
        "--policy",
        "pedl",
        "--instance-type",
        "p3.8xlarge",
        "--instance-type",
        "p3.16xlarge",
        "--spot",
        columns=80,
    )
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith("pedl sim:"))
    assert line.rstrip() == "pedl sim: p3.8xlarge, p3.16xlarge, max 200, idle 5m, spot"
