"""The series digest (pure): what folding keeps, the answer it gives a chart, and its bytes."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pedl.master.metrics import series_digest
from pedl.master.metrics.series_digest import BUCKETS, Digest, answer, decode, encode, fold


def _series(n: int, seed: int, gap: int, levels: int) -> list[tuple[int, float]]:
    """n points, steps a random 1..gap apart from a random start, values from `levels` distinct ones
    (few levels: many ties)."""
    rng = random.Random(seed)
    step = rng.randrange(0, 1000)
    out = []
    for _ in range(n):
        out.append((step, float(rng.randrange(levels)) - levels / 2))
        step += rng.randint(1, gap)
    return out


series_strategy = st.builds(
    _series,
    st.integers(min_value=1, max_value=4000),
    st.integers(min_value=0),
    st.integers(min_value=1, max_value=5000),
    st.integers(min_value=1, max_value=1000),
)


def _buckets_of(points: list[tuple[int, float]], origin: int, width: int) -> dict[int, list[tuple[int, float]]]:
    out: dict[int, list[tuple[int, float]]] = {}
    for step, value in points:
        out.setdefault((step - origin) // width, []).append((step, value))
    return out


@settings(max_examples=60, deadline=None)
@given(series_strategy, st.integers(min_value=1, max_value=7))
def test_fold_keeps_each_buckets_exact_extremes_however_the_points_arrive_in_batches(points, parts):
    d = Digest()
    cut = sorted(random.Random(len(points)).sample(range(len(points) + 1), min(parts, len(points) + 1)))
    for lo, hi in zip([0, *cut], [*cut, len(points)], strict=True):
        fold(d, points[lo:hi])
    assert d.points == len(points) and d.origin == points[0][0] and d.last_step == points[-1][0]
    assert d.width & (d.width - 1) == 0
    expected = _buckets_of(points, d.origin, d.width)
    assert max(expected) < BUCKETS
    for i in range(BUCKETS):
        got = expected.get(i, [])
        assert d.counts[i] == len(got)
        if got:
            low = min(v for _, v in got)
            high = max(v for _, v in got)
            assert (d.min_steps[i], d.min_values[i]) == next(p for p in got if p[1] == low)  # the earliest
            assert (d.max_steps[i], d.max_values[i]) == [p for p in got if p[1] == high][-1]  # the latest
    # and the narrowest width that fits: half of it would not
    if d.width > 1:
        assert (points[-1][0] - d.origin) // (d.width // 2) >= BUCKETS


@settings(max_examples=60, deadline=None)
@given(series_strategy, st.integers(min_value=2, max_value=2 * BUCKETS))
def test_answer_is_real_points_within_bounds_with_the_extremes_kept(points, max_points):
    d = Digest()
    fold(d, points)
    got = answer(d, max_points)
    if got is None:  # only when the series is short enough to be given whole and the digest lost points
        assert len(points) <= max_points and any(d.counts[i] > 2 for i in range(BUCKETS))
        return
    steps, values = got
    assert len(steps) <= max_points
    assert steps == sorted(set(steps))
    real = dict(points)
    assert all(real[s] == v for s, v in zip(steps, values, strict=True))
    if len(points) <= max_points:
        assert list(zip(steps, values, strict=True)) == points  # whole
    else:
        assert min(values) == min(real.values()) and max(values) == max(real.values())


def test_a_spike_in_a_million_points_survives():
    rng = random.Random(7)
    points = [(step, rng.random()) for step in range(1, 1_000_001)]
    points[654_321] = (points[654_321][0], 50.0)
    points[123_456] = (points[123_456][0], -50.0)
    d = Digest()
    fold(d, points)
    steps, values = answer(d, 500)
    assert len(steps) <= 500
    assert (points[654_321][0], 50.0) in zip(steps, values, strict=True)
    assert (points[123_456][0], -50.0) in zip(steps, values, strict=True)


def test_answer_groups_hold_the_exact_min_and_max_of_their_steps():
    rng = random.Random(3)
    points = [(step * 3, rng.uniform(-1, 1)) for step in range(10_000)]
    d = Digest()
    fold(d, points)
    steps, values = answer(d, 200)
    k = -(-((points[-1][0] - d.origin) // d.width + 1) // 100)
    span = k * d.width
    by_group: dict[int, list[float]] = {}
    for s, v in zip(steps, values, strict=True):
        by_group.setdefault((s - d.origin) // span, []).append(v)
    for g, got in by_group.items():
        inside = [v for s, v in points if (s - d.origin) // span == g]
        assert sorted(got) == sorted({min(inside), max(inside)})
    assert len(by_group) == -(-len(points) * 3 // span) or len(by_group) == len(
        {(s - d.origin) // span for s, _ in points}
    )


def test_a_short_series_is_given_whole_and_a_lossy_one_says_so():
    d = Digest()
    fold(d, [(s, float(s % 5)) for s in range(0, 300, 3)])
    assert answer(d, 100) == ([s for s in range(0, 300, 3)], [float(s % 5) for s in range(0, 300, 3)])
    lossy = Digest()
    fold(lossy, [(s, 1.0) for s in range(5000)])  # width 8: eight points a bucket
    assert lossy.points == 5000 and answer(lossy, 6000) is None
    assert len(answer(lossy, 1000)[0]) <= 1000


def test_fold_refuses_a_step_not_after_the_last():
    d = Digest()
    fold(d, [(10, 1.0), (20, 2.0)])
    with pytest.raises(ValueError, match="not after"):
        fold(d, [(20, 3.0)])
    with pytest.raises(ValueError, match="not after"):
        fold(d, [(5, 3.0)])
    assert d.points == 2


def test_answer_refuses_fewer_than_two_points():
    with pytest.raises(ValueError, match="at least 2"):
        answer(Digest(), 1)


@settings(max_examples=40, deadline=None)
@given(series_strategy)
def test_encode_decode_round_trip(points):
    d = Digest()
    fold(d, points)
    back = decode(encode(d))
    assert (back.origin, back.width, back.points, back.last_step) == (d.origin, d.width, d.points, d.last_step)
    for name in ("counts", "min_steps", "min_values", "max_steps", "max_values"):
        assert getattr(back, name) == getattr(d, name) or all(
            getattr(back, name)[i] == getattr(d, name)[i] for i in range(BUCKETS) if d.counts[i]
        )
    assert answer(back, 300) == answer(d, 300)
    fold(back, [(points[-1][0] + 1, 0.5)])  # a decoded digest folds on
    assert back.points == d.points + 1


def test_empty_digest_round_trips_and_answers_nothing():
    back = decode(encode(Digest()))
    assert back.points == 0 and back.last_step is None and answer(back, 10) == ([], [])
    fold(back, [(4, 1.0)])
    assert back.origin == 4


def _full() -> bytes:
    d = Digest()
    fold(d, [(s, float(s)) for s in range(50)])
    return encode(d)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00" * 39,
        _full()[:-1],
        _full() + b"\x00",
        struct.pack("<qqqqq", 0, 1, 0, 0, BUCKETS + 1),
        struct.pack("<qqqqq", 0, 0, 0, 0, 0),
    ],
)
def test_decode_refuses_damaged_bytes(data):
    with pytest.raises(ValueError):
        decode(data)


@settings(max_examples=60, deadline=None)
@given(series_strategy, st.integers(min_value=0, max_value=300))
def test_folding_by_buckets_gives_the_digest_folding_one_by_one_gives(points, head):
    """The numpy fold (many points at once) against the one-by-one fold, onto a digest that already
    holds some points, with many ties (few value levels)."""
    by_buckets, one_by_one = Digest(), Digest()
    for d in (by_buckets, one_by_one):
        series_digest._fold_each(d, points[:head])
    folded = series_digest._fold_many(by_buckets, points[head:]) if points[head:] else True
    assert folded
    series_digest._fold_each(one_by_one, points[head:])
    assert by_buckets == one_by_one


def test_points_out_of_order_fold_nothing_by_buckets_and_raise_at_the_first():
    d = Digest()
    points = [(step, 1.0) for step in range(100)]
    points[50] = (10, 1.0)
    assert series_digest._fold_many(d, points) is False and d == Digest()
    with pytest.raises(ValueError, match="step 10 is not after"):
        fold(d, points)


@given(series_strategy, st.integers(min_value=0, max_value=300))
def test_fold_arrays_is_fold(points, head):
    """The batch path hands a name's steps and values as arrays: the digest `fold` makes of the same points,
    a few (one by one) or many (by buckets)."""
    import numpy as np

    by_arrays, by_points = Digest(), Digest()
    for d in (by_arrays, by_points):
        fold(d, points[:head])
    rest = points[head:]
    series_digest.fold_arrays(
        by_arrays, np.array([p[0] for p in rest], dtype=np.int64), np.array([p[1] for p in rest], dtype=np.float64)
    )
    fold(by_points, rest)
    assert by_arrays == by_points
