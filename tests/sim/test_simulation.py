"""A whole run: trace file in, figures for both policies out; and a smoke replay of the real trace."""

from __future__ import annotations

import itertools

import pytest

from pedl.sim import CloudSettings, default_pool, parse_window, simulate
from pedl.sim.pool import override
from tests.sim.scenarios import REAL_TRACE, csv_row

KEYS = {
    "instance_hours",
    "cost",
    "lower_bound_instance_hours",
    "cost_ratio",
    "idle_instance_hours",
    "queue_p50_s",
    "queue_p95_s",
    "queue_max_s",
    "launches",
    "jobs",
    "jobs_never_fit",
    "interruptions",
    "wall_seconds",
}


def test_both_policies_replay_the_same_jobs_against_the_same_bound(write_trace) -> None:
    path = write_trace(
        csv_row("a", 1, 0, 3600, 0),
        csv_row("b", 4, 100, 7300, 100),
        csv_row("c", 8, 50, 3650, 50),
        csv_row("cpu", 0, 0, 100, 0),
    )
    report = simulate(path, default_pool(), CloudSettings(), ["pedl", "determined"])
    assert list(report.results) == ["pedl", "determined"]
    for r in report.results.values():
        assert r.jobs == 3 and r.jobs_finished == 3 and r.jobs_unfinished == 0
    assert report.results["pedl"].lower_bound_instance_hours == report.results["determined"].lower_bound_instance_hours
    data = report.to_dict()
    assert set(data["policies"]["pedl"]) >= KEYS
    assert data["trace"]["cpu_jobs_excluded"] == 1
    assert any("idle instance-hours" in n for n in data["notes"])


@pytest.mark.skipif(not REAL_TRACE.exists(), reason=f"{REAL_TRACE} is not there")
def test_smoke_first_300_rows_of_the_real_trace(tmp_path) -> None:
    path = tmp_path / "head.csv"
    with REAL_TRACE.open() as src:
        path.write_text("".join(itertools.islice(src, 301)))
    pool = override(default_pool(), spot=True)
    report = simulate(path, pool, CloudSettings(seed=1), ["pedl", "determined"])
    assert report.trace.rows == 300
    for r in report.results.values():
        assert r.jobs == report.trace.jobs > 0
        assert r.jobs_finished + r.jobs_never_fit == r.jobs
        assert r.instance_hours >= r.lower_bound_instance_hours * 0.999 > 0
        assert r.idle_instance_hours <= r.instance_hours and r.queue_max_s >= r.queue_p95_s >= r.queue_p50_s
        assert r.interruptions > 0 and r.launches > 0
    windowed = simulate(path, pool, CloudSettings(seed=1), ["pedl"], window=parse_window("0:1d"))
    assert windowed.trace.outside_window > 0 and windowed.results["pedl"].jobs < report.trace.jobs
