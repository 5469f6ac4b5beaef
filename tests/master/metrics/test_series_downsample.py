"""The pure parts of the metric series: the downsampler against a brute-force reference (hypothesis),
the batching of trials, one report per step, and telling PostgreSQL's JSON numbers from the rest."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pedl.master.metrics import series as metric_series
from pedl.master.metrics.downsample import MAX_POINTS, MIN_POINTS, bucket_count, downsample


def reference(steps: list[int], values: list[float], max_points: int) -> list[tuple[int, float]]:
    """The definition, spelled out: every point when few enough; else per bucket (exact integer
    arithmetic) the earliest point of the smallest value and the earliest of the largest."""
    points = list(zip(steps, values, strict=True))
    if len(points) <= max_points:
        return points
    buckets = bucket_count(max_points)
    first, span = steps[0], steps[-1] - steps[0] + 1
    kept: set[tuple[int, float]] = set()
    for b in range(buckets):
        inside = [(s, v) for s, v in points if (s - first) * buckets // span == b]
        if inside:
            kept.add(min(inside, key=lambda p: (p[1], p[0])))
            kept.add(min(inside, key=lambda p: (-p[1], p[0])))
    return sorted(kept)


@st.composite
def series(draw: st.DrawFn) -> tuple[list[int], list[float], int]:
    gaps = draw(st.lists(st.integers(1, draw(st.sampled_from([1, 3, 1000, 10**9]))), min_size=1, max_size=400))
    start = draw(st.integers(0, 10**6))
    steps = [start + sum(gaps[:i]) for i in range(len(gaps))]
    # few distinct values make ties common; wide floats make spikes
    value = st.one_of(st.integers(-3, 3).map(float), st.floats(-1e12, 1e12, allow_nan=False))
    values = draw(st.lists(value, min_size=len(steps), max_size=len(steps)))
    max_points = draw(st.one_of(st.integers(MIN_POINTS, 12), st.integers(MIN_POINTS, 500)))
    return steps, values, max_points


@settings(max_examples=400, deadline=None)
@given(series())
def test_downsample_matches_the_reference(case: tuple[list[int], list[float], int]) -> None:
    steps, values, max_points = case
    got_steps, got_values = downsample(steps, values, max_points)
    got = list(zip(got_steps, got_values, strict=True))
    assert got == reference(steps, values, max_points)
    assert len(got) <= max_points
    assert set(got) <= set(zip(steps, values, strict=True))
    if len(steps) > max_points:  # the series' own extremes always survive
        assert min(values) in got_values and max(values) in got_values


def test_downsample_keeps_one_point_where_min_and_max_coincide() -> None:
    steps = list(range(10))
    assert downsample(steps, [5.0] * 10, 4) == ([0, 5], [5.0, 5.0])  # two buckets of a flat line
    assert downsample([0, 1], [1.0, 2.0], MAX_POINTS) == ([0, 1], [1.0, 2.0])


def test_downsample_refuses_what_it_cannot_do() -> None:
    with pytest.raises(ValueError, match="max_points"):
        downsample([1, 2, 3], [1.0, 2.0, 3.0], 1)
    with pytest.raises(ValueError, match="length"):
        downsample([1, 2], [1.0], 2)


@given(st.lists(st.integers(0, 5000), max_size=60), st.integers(1, 50), st.integers(1, 20_000))
def test_batches_keep_every_trial_in_order_and_within_the_budget(
    reports: list[int], per_report: int, budget: int
) -> None:
    counts = list(enumerate(reports, start=1))
    got = metric_series.batches(counts, per_report, budget)
    assert [t for batch in got for t in batch] == [t for t, _ in counts]
    size = dict(counts)
    for batch in got:
        assert batch and (len(batch) == 1 or sum(size[t] for t in batch) * per_report <= budget)


def test_the_later_report_of_a_step_wins_whole() -> None:
    rows = [(1, 7, 10, 1.0, 5.0), (4, 7, 20, None, 6.0), (3, 7, 20, 2.0, 7.0), (5, 7, 30, 3.0, None)]
    assert metric_series.latest_per_step(rows) == [rows[0], rows[1], rows[3]]
    found = metric_series.collect(rows, ["a", "b"], metric_series._sqlite_numbers)
    assert found == {"a": ([10, 30], [1.0, 3.0]), "b": ([10, 20], [5.0, 6.0])}
    assert metric_series.collect([], ["a"], metric_series._sqlite_numbers) == {}


def test_postgres_json_texts_that_are_numbers() -> None:
    texts = ["1.5", "-2", "1e5", "0", "3E-2", "true", "false", "null", '"NaN"', '"1.5"', "{}", "[1]", None, "1e999"]
    assert metric_series._postgres_numbers(texts) == [1.5, -2.0, 1e5, 0.0, 0.03] + [None] * 9
    assert metric_series._postgres_numbers(["1", "2.5"]) == [1.0, 2.5]


def test_names_asked_for_are_checked() -> None:
    assert metric_series.check_names(["b", "a", "b"]) == ["b", "a"]
    assert metric_series.check_names(["x"] * 60) == ["x"]  # repeats are not more names
    for bad in ([""], ["n" * 256], [f"n{i}" for i in range(51)]):
        with pytest.raises(metric_series.InvalidArgument, match="names"):
            metric_series.check_names(bad)
