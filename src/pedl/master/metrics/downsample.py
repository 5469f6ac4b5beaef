"""Downsampling a metric series for a chart, as pure functions.

A series of at most `max_points` points is kept whole. A longer one has its step range split into
`max_points // 2` buckets of equal width (the bucket of step s is floor((s - first) * buckets /
(last - first + 1)), in exact integer arithmetic); each bucket keeps the point with its smallest value
and the point with its largest (the earliest step among equal values; one point when both are the
same), in step order. Spikes survive, and no answer has more than `max_points` points."""

from __future__ import annotations

from bisect import bisect_left

DEFAULT_POINTS = 1000
MIN_POINTS = 2
MAX_POINTS = 10_000


def bucket_count(max_points: int) -> int:
    return max_points // 2


def downsample(steps: list[int], values: list[float], max_points: int) -> tuple[list[int], list[float]]:
    """At most `max_points` points of the series (`steps` strictly increasing, `values` finite, one
    per step): all of them, or each bucket's minimum and maximum. Linear in the series' length; the
    minimum and maximum of a bucket are found by the interpreter's own min and max over a slice."""
    if max_points < MIN_POINTS:
        raise ValueError(f"max_points must be at least {MIN_POINTS}, not {max_points}")
    if len(steps) != len(values):
        raise ValueError("steps and values differ in length")
    n = len(steps)
    if n <= max_points:
        return list(steps), list(values)
    buckets = bucket_count(max_points)
    first, span = steps[0], steps[-1] - steps[0] + 1
    keep: list[int] = []
    lo = 0
    for k in range(1, buckets + 1):
        # bucket k-1 ends before the first step s with (s - first) * buckets >= k * span
        hi = n if k == buckets else bisect_left(steps, first + -(-k * span // buckets), lo)
        if hi - lo > 1:
            chunk = values[lo:hi]
            low, high = lo + chunk.index(min(chunk)), lo + chunk.index(max(chunk))
            if low < high:
                keep += (low, high)
            elif high < low:
                keep += (high, low)
            else:
                keep.append(low)
        elif hi > lo:
            keep.append(lo)
        lo = hi
    return [steps[i] for i in keep], [values[i] for i in keep]
