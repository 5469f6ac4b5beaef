"""Trace loading: what becomes a job, what is left out and counted, and errors that name the option."""

from __future__ import annotations

import math

import pytest

from pedl.sim.trace import TraceError, TraceJob, Window, load_trace, parse_window
from tests.sim.scenarios import csv_row


def test_rows_become_jobs_sorted_by_arrival(write_trace) -> None:
    path = write_trace(csv_row("b", 2, 100, 700, 150), csv_row("a", 1, 10, 3610, 10))
    jobs, summary = load_trace(path)
    assert jobs == [TraceJob("a", 10.0, 3600.0, 1), TraceJob("b", 100.0, 550.0, 2)]  # run = deletion - scheduled
    assert summary.rows == 2 and summary.jobs == 2


def test_left_out_rows_are_counted_by_reason(write_trace) -> None:
    path = write_trace(
        csv_row("ok", 1, 0, 100, 0),
        csv_row("never-ran", 1, 0, 100, ""),  # a pod that stayed Pending: no scheduled_time
        csv_row("no-end", 1, 0, "", 0),
        csv_row("zero-run", 1, 50, 50, 50),
        csv_row("cpu", 0, 0, 100, 0),
        csv_row("shared", 1, 0, 100, 0, milli=460),
    )
    jobs, s = load_trace(path)
    assert [j.id for j in jobs] == ["ok", "shared"]
    assert (s.skipped_missing_times, s.skipped_nonpositive_run_time, s.cpu_jobs_excluded) == (2, 1, 1)
    assert s.gpu_sharing_as_whole == 1 and jobs[1].slots == 1  # a shared GPU is taken whole
    notes = " ".join(s.notes())
    assert "--include-cpu-jobs" in notes and "no fractional slots" in notes


def test_cpu_jobs_are_replayed_on_request_with_zero_slots(write_trace) -> None:
    path = write_trace(csv_row("cpu", 0, 0, 100, 0), csv_row("gpu", 1, 0, 100, 0))
    jobs, s = load_trace(path, include_cpu_jobs=True)
    assert [(j.id, j.slots) for j in jobs] == [("cpu", 0), ("gpu", 1)]
    assert s.cpu_jobs_included == 1 and s.cpu_jobs_excluded == 0


def test_window_filters_by_arrival(write_trace) -> None:
    day = 86400
    path = write_trace(*(csv_row(f"j{d}", 1, d * day, d * day + 60, d * day) for d in range(5)))
    jobs, s = load_trace(path, parse_window("1d:3d"))
    assert [j.id for j in jobs] == ["j1", "j2"]  # start inclusive, end exclusive
    assert s.outside_window == 3
    assert [j.id for j in load_trace(path, parse_window("3d:"))[0]] == ["j3", "j4"]
    assert [j.id for j in load_trace(path, parse_window(":86400"))[0]] == ["j0"]


@pytest.mark.parametrize(
    ("text", "window"),
    [
        ("10d:20d", Window(864000.0, 1728000.0)),
        ("0:86400", Window(0.0, 86400.0)),
        ("1d12h:", Window(129600.0, math.inf)),
        (":90m", Window(0.0, 5400.0)),
        ("1.5h:2h30s", Window(5400.0, 7230.0)),
    ],
)
def test_window_forms(text: str, window: Window) -> None:
    assert parse_window(text) == window


@pytest.mark.parametrize("text", ["10d-20d", "10d", "a:b", "5:3", "1:2:3", "-1:5", "1w:2w"])
def test_malformed_windows_name_the_option(text: str) -> None:
    with pytest.raises(TraceError, match="^--window: "):
        parse_window(text)


def test_missing_file_names_the_option(tmp_path) -> None:
    with pytest.raises(TraceError, match="^--trace: no such file"):
        load_trace(tmp_path / "nope.csv")


def test_missing_columns_are_listed(write_trace) -> None:
    path = write_trace("a,1,5", header="name,num_gpu,creation_time")
    with pytest.raises(TraceError, match="lacks required column.*deletion_time, scheduled_time"):
        load_trace(path)


def test_a_bad_value_names_the_line_and_column(write_trace) -> None:
    path = write_trace(csv_row("a", 1, 0, 100, 0), csv_row("b", 1, "soon", 100, 0))
    with pytest.raises(TraceError, match="line 3: creation_time 'soon' is not a number"):
        load_trace(path)
    path = write_trace(csv_row("a", 1.5, 0, 100, 0))  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="line 2: num_gpu '1.5' is not a whole number"):
        load_trace(path)
