"""The cost floor a replay is measured against: instance-hours if every job ran at its arrival for its
trace run time on perfectly packed instances, ∫ ceil(GPUs demanded(t) / GPUs per instance) dt."""

from __future__ import annotations

import math
from collections.abc import Iterable

from pedl.sim.trace import TraceJob


def lower_bound_instance_hours(jobs: Iterable[TraceJob], gpus_per_instance: int) -> float:
    """Exact, by sweeping arrivals and finishes (no queueing, no boot, no idle time). A moment when
    only 0-GPU jobs run counts one instance: they still need an agent."""
    if gpus_per_instance <= 0:
        raise ValueError("gpus_per_instance must be positive")
    deltas: dict[float, list[int]] = {}
    for job in jobs:
        for t, sign in ((job.arrival, 1), (job.arrival + job.run_time, -1)):
            d = deltas.setdefault(t, [0, 0])
            d[0] += sign * job.slots
            d[1] += sign
    gpus = running = 0
    total = 0.0
    times = sorted(deltas)
    for t, t_next in zip(times, times[1:], strict=False):
        gpus += deltas[t][0]
        running += deltas[t][1]
        instances = math.ceil(gpus / gpus_per_instance) if gpus > 0 else (1 if running > 0 else 0)
        total += instances * (t_next - t)
    return total / 3600.0
