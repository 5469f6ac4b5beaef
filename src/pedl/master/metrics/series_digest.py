"""A metric series' digest, as pure functions: the minimum and the maximum point of each bucket of
steps, in at most BUCKETS buckets, kept up to date as points arrive, so that a chart's downsampled
series is read from one small value however many reports the series has.

Bucket i holds the steps origin + i * width to origin + (i + 1) * width - 1, where origin is the
series' first step and width a power of two. A point past the last bucket doubles the width first,
merging each pair of neighbouring buckets into one: a merge keeps the exact minimum and maximum of
the pair, so a digest is always exactly what folding every point into buckets of its width gives.
Of equal values a bucket's minimum is the earliest point and its maximum the latest, so a bucket of
two points holds both of them. An empty bucket's minimum is +inf and its maximum -inf.

`answer` downsamples a digest for a chart: k neighbouring buckets per answer bucket, the smallest k
that leaves at most max_points // 2 of them, each giving its minimum and maximum point in step order.
A series of at most max_points points is given whole, when the digest still holds every point (no
bucket has more than two); otherwise `answer` says so and the caller reads the points themselves."""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import chain, repeat

import numpy as np

BUCKETS = 1024
DIGEST_POINTS = 2 * BUCKETS  # the most points an answer from a digest can have

_HEADER = struct.Struct("<qqqqq")  # origin, width, points, last step, buckets stored
_NONE = -(2**63)  # last step of an empty digest, in the header


def _filled(code: str, value: float = 0) -> array:
    return array(code, [value]) * BUCKETS


INF = float("inf")


@dataclass
class Digest:
    """An empty bucket has count 0, minimum +inf and maximum -inf: it merges and compares as nothing."""

    origin: int | None = None  # the first step folded
    width: int = 1
    points: int = 0
    last_step: int | None = None
    counts: array = field(default_factory=lambda: _filled("q"))
    min_steps: array = field(default_factory=lambda: _filled("q"))
    min_values: array = field(default_factory=lambda: _filled("d", INF))
    max_steps: array = field(default_factory=lambda: _filled("q"))
    max_values: array = field(default_factory=lambda: _filled("d", -INF))


def _halve(d: Digest) -> None:
    """Double the width: bucket j becomes old buckets 2j and 2j + 1 together."""
    counts, min_steps, min_values = d.counts, d.min_steps, d.min_values
    max_steps, max_values = d.max_steps, d.max_values
    for j in range(BUCKETS // 2):
        a, b = 2 * j, 2 * j + 1
        lo = a if min_values[a] <= min_values[b] else b  # the earlier of equal minima
        hi = b if max_values[b] >= max_values[a] else a  # the later of equal maxima
        counts[j] = counts[a] + counts[b]
        min_steps[j], min_values[j] = min_steps[lo], min_values[lo]
        max_steps[j], max_values[j] = max_steps[hi], max_values[hi]
    half = BUCKETS // 2
    counts[half:] = _filled("q")[half:]
    min_steps[half:] = max_steps[half:] = _filled("q")[half:]  # an empty bucket is all zero steps, however made
    min_values[half:] = _filled("d", INF)[half:]
    max_values[half:] = _filled("d", -INF)[half:]
    d.width *= 2


def fold(d: Digest, points: Iterable[tuple[int, float]]) -> None:
    """Fold (step, value) points (finite values) into the digest, in increasing step order, each step
    after the digest's last (a ValueError otherwise: an earlier step needs a digest built again).
    Many points at once are folded by whole buckets (numpy), a few one by one: the same digest."""
    points = points if isinstance(points, list) else list(points)
    if len(points) >= VECTOR_POINTS and _fold_many(d, points):
        return
    _fold_each(d, points)


VECTOR_POINTS = 64  # from this many points on, folding by buckets is the cheaper


def fold_arrays(d: Digest, steps: np.ndarray, values: np.ndarray) -> None:
    """`fold` of the points (steps[i], values[i]) (int64 and float64 arrays of finite values)."""
    if len(steps) >= VECTOR_POINTS and _fold_arrays(d, steps, values):
        return
    _fold_each(d, list(zip(steps.tolist(), values.tolist(), strict=True)))


def _fold_each(d: Digest, points: list[tuple[int, float]]) -> None:
    counts, min_steps, min_values = d.counts, d.min_steps, d.min_values
    max_steps, max_values = d.max_steps, d.max_values
    last = d.last_step
    for step, value in points:
        if last is not None and step <= last:
            raise ValueError(f"step {step} is not after the digest's last step {last}")
        if d.origin is None:
            d.origin = step
        i = (step - d.origin) // d.width
        while i >= BUCKETS:
            _halve(d)
            i = (step - d.origin) // d.width
        if value < min_values[i]:
            min_steps[i], min_values[i] = step, value
        if value >= max_values[i]:
            max_steps[i], max_values[i] = step, value
        counts[i] += 1
        d.points += 1
        last = step
    d.last_step = last


def _fold_many(d: Digest, points: list[tuple[int, float]]) -> bool:
    """Fold points in increasing step order after the digest's last, bucket by bucket: widen first
    to the width the last point needs (a digest is what folding every point at its final width
    gives), then each bucket's earliest minimum and latest maximum of the new points against what it
    held (held points are all earlier). -> False, folding nothing, for points out of order (the
    one-by-one fold raises at the first of them)."""
    steps = np.fromiter((p[0] for p in points), dtype=np.int64, count=len(points))
    values = np.fromiter((p[1] for p in points), dtype=np.float64, count=len(points))
    return _fold_arrays(d, steps, values)


def _fold_arrays(d: Digest, steps: np.ndarray, values: np.ndarray) -> bool:
    """`_fold_many` of the points as arrays."""
    if (d.last_step is not None and steps[0] <= d.last_step) or not (steps[1:] > steps[:-1]).all():
        return False
    if d.origin is None:
        d.origin = int(steps[0])
    while (int(steps[-1]) - d.origin) // d.width >= BUCKETS:
        _halve(d)
    index = (steps - d.origin) // d.width  # non-decreasing
    starts = np.flatnonzero(np.concatenate(([True], index[1:] != index[:-1])))
    sizes = np.diff(np.append(starts, len(steps)))
    segment = np.repeat(np.arange(len(starts)), sizes)
    buckets = index[starts]
    low = np.minimum.reduceat(values, starts)
    high = np.maximum.reduceat(values, starts)
    at_low = np.flatnonzero(values == low[segment])  # each segment's first of these is its earliest minimum
    first_low = at_low[np.unique(segment[at_low], return_index=True)[1]]
    at_high = np.flatnonzero(values == high[segment])[::-1]  # reversed: the first found is the latest
    last_high = at_high[np.unique(segment[at_high], return_index=True)[1]]
    counts = np.frombuffer(d.counts, dtype=np.int64)
    min_steps, min_values = np.frombuffer(d.min_steps, dtype=np.int64), np.frombuffer(d.min_values)
    max_steps, max_values = np.frombuffer(d.max_steps, dtype=np.int64), np.frombuffer(d.max_values)
    new_low = low < min_values[buckets]  # a held minimum is earlier: it keeps a tie
    min_steps[buckets[new_low]] = steps[first_low[new_low]]
    min_values[buckets[new_low]] = low[new_low]
    new_high = high >= max_values[buckets]  # a held maximum is earlier: a new one takes a tie
    max_steps[buckets[new_high]] = steps[last_high[new_high]]
    max_values[buckets[new_high]] = high[new_high]
    counts[buckets] += sizes
    d.points += len(steps)
    d.last_step = int(steps[-1])
    return True


def _used(d: Digest) -> int:
    """Buckets up to the last one holding a point."""
    if d.last_step is None or d.origin is None:
        return 0
    return (d.last_step - d.origin) // d.width + 1


def answer(d: Digest, max_points: int) -> tuple[list[int], list[float]] | None:
    """The chart's (steps, values) of at most max_points points (at least 2), or None when the series
    has at most max_points points but the digest no longer holds them all."""
    if max_points < 2:
        raise ValueError(f"max_points must be at least 2, not {max_points}")
    used = _used(d)
    if not used:
        return [], []
    if d.points <= max_points:
        if max(d.counts[:used]) > 2:
            return None
        k = 1
    else:
        k = -(-used // (max_points // 2))
    n = -(-used // k) * k  # whole groups of k; buckets past the last used are empty
    pad = max(0, n - BUCKETS)
    # (value, step) pairs: min takes the earliest of equal minima, max the latest of equal maxima
    lows = zip(chain(d.min_values[:n], repeat(INF, pad)), chain(d.min_steps[:n], repeat(0, pad)), strict=False)
    highs = zip(chain(d.max_values[:n], repeat(-INF, pad)), chain(d.max_steps[:n], repeat(0, pad)), strict=False)
    if k > 1:
        lows = map(min, zip(*[lows] * k, strict=False))
        highs = map(max, zip(*[highs] * k, strict=False))
    steps: list[int] = []
    values: list[float] = []
    for (low, low_step), (high, high_step) in zip(lows, highs, strict=False):
        if low == INF:
            continue
        if low_step == high_step:
            steps.append(low_step)
            values.append(low)
        elif low_step < high_step:
            steps += (low_step, high_step)
            values += (low, high)
        else:
            steps += (high_step, low_step)
            values += (high, low)
    return steps, values


def _little(a: array) -> array:
    if sys.byteorder != "little":
        a = array(a.typecode, a)
        a.byteswap()
    return a


def encode(d: Digest) -> bytes:
    """The digest as bytes: a header, then each array up to its last used bucket, little-endian."""
    used = _used(d)
    header = _HEADER.pack(d.origin or 0, d.width, d.points, _NONE if d.last_step is None else d.last_step, used)
    parts = [header] + [
        _little(a[:used]).tobytes() for a in (d.counts, d.min_steps, d.min_values, d.max_steps, d.max_values)
    ]
    return b"".join(parts)


def points_of(data: bytes) -> int:
    """The points folded into an encoded digest, without decoding it."""
    return _HEADER.unpack_from(data)[2]


def decode(data: bytes) -> Digest:
    """What encode wrote; a ValueError for anything else."""
    if len(data) < _HEADER.size:
        raise ValueError("a digest is too short")
    origin, width, points, last_step, used = _HEADER.unpack_from(data)
    if not 0 <= used <= BUCKETS or width < 1 or len(data) != _HEADER.size + 5 * 8 * used:
        raise ValueError("a digest's length does not match its header")
    d = Digest(None if last_step == _NONE else origin, width, points, None if last_step == _NONE else last_step)
    offset = _HEADER.size
    for name in ("counts", "min_steps", "min_values", "max_steps", "max_values"):
        target: array = getattr(d, name)
        part = array(target.typecode)
        part.frombytes(data[offset : offset + 8 * used])
        if sys.byteorder != "little":
            part.byteswap()
        target[:used] = part
        offset += 8 * used
    return d
