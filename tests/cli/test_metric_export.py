"""`pedl trial export-metrics`: the master's CSV streamed to stdout or into a file (complete or not
there at all), with progress on stderr; bad arguments name the option and send nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.cli import checkpoint_download, metric_export
from tests.cli.fake_master import NDJSON, FakeMaster

CSV_PATH = "/api/v1/trials/4/metrics/csv"
LINES = [
    "trial_id,trial_run_id,group,steps_completed,report_time,loss",
    *(f"4,1,training,{step},2023-11-14T22:13:20Z,0.{step}" for step in range(1, 6)),
]


def csv_reply(pause: float = 0.0) -> NDJSON:
    """The fake master streams lines as they are (its NDJSON answer with raw lines): the CLI copies
    the body whatever its type."""
    return NDJSON([], pause=pause, raw_lines=LINES)


def test_to_stdout(cli, master: FakeMaster) -> None:
    master.route("GET", CSV_PATH, csv_reply())
    result = cli("trial", "export-metrics", "4")
    assert result.exit_code == 0, result.output
    assert result.stdout == "".join(line + "\n" for line in LINES)
    (req,) = master.calls("GET", CSV_PATH)
    assert req.q("group") is None


def test_to_a_file_with_progress(cli, master: FakeMaster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checkpoint_download, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(metric_export, "CHUNK", 16)
    master.route("GET", CSV_PATH, csv_reply(pause=0.001))
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / "m.csv"
    result = cli("trial", "export-metrics", "4", "--group", "validation", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text() == "".join(line + "\n" for line in LINES)
    assert list(out.parent.iterdir()) == [out]  # no partial file left behind
    size = out.stat().st_size
    assert result.stdout == f"Wrote {size} B of trial 4's metrics to {out}\n"
    progress = [line for line in result.stderr.splitlines() if line.startswith("Exporting trial 4's metrics: ")]
    assert len(progress) >= 2 and progress[-1].endswith(f": {size} B"), result.stderr
    assert master.calls("GET", CSV_PATH)[0].q("group") == "validation"


def test_an_error_leaves_no_file(cli, master: FakeMaster, tmp_path: Path) -> None:
    master.route("GET", "/api/v1/trials/77/metrics/csv", (404, {"code": "not_found", "message": "trial 77 not found"}))
    (tmp_path / "out").mkdir()
    result = cli("trial", "export-metrics", "77", "-o", str(tmp_path / "out" / "m.csv"))
    assert result.exit_code == 1
    assert result.output.strip() == "error: trial 77 not found"
    assert list((tmp_path / "out").iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--group", ""], "--group: must be 1 to 64 characters long, not 0"),
        (["--group", "g" * 65], "--group: must be 1 to 64 characters long, not 65"),
        (["-o", "{tmp}"], "--output {tmp}: is a directory; give a file name"),
        (["-o", "{tmp}/no/m.csv"], "--output {tmp}/no/m.csv: the directory {tmp}/no does not exist"),
    ],
)
def test_bad_arguments_name_the_option(cli, master: FakeMaster, tmp_path: Path, args: list[str], message: str) -> None:
    result = cli("trial", "export-metrics", "4", *(a.format(tmp=tmp_path) for a in args))
    assert result.exit_code == 1
    assert result.output.strip() == f"error: {message.format(tmp=tmp_path)}"
    assert master.calls("GET", CSV_PATH) == []
