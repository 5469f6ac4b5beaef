"""The figures of one replay under one policy, and the order and labels they are printed in."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100); 0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[max(1, math.ceil(p / 100 * len(ordered))) - 1]


@dataclass
class PolicyResult:
    policy: str
    instance_types: list[str]
    instance_hours: float  # billed: from launch (spot: fulfilment) to termination, booting included
    cost: float  # USD: instance-hours × price (spot at the spot price)
    spot_instance_hours: float
    lower_bound_instance_hours: float
    cost_ratio: float  # instance_hours ÷ lower_bound_instance_hours
    idle_instance_hours: float  # billed time with no job on the instance, booting and notice included
    boot_instance_hours: float  # the booting part of idle_instance_hours
    queue_p50_s: float  # job arrival to its first start
    queue_p95_s: float
    queue_max_s: float
    launches: int  # instances launched or spot requests made
    spot_launches: int
    spot_requests_cancelled: int  # open spot requests the decider gave up on
    jobs: int
    jobs_finished: int
    jobs_never_fit: int  # dropped: no allowed type fits (or ignored by the Determined-style policy)
    jobs_unfinished: int  # still waiting when nothing else could happen (should be 0)
    interruptions: int  # spot instances reclaimed
    jobs_requeued: int  # job runs cut short by an interruption and queued again
    lost_work_hours: float  # GPU-hours of run time since the last checkpoint, lost to interruptions
    gpu_hours_used: float  # GPU-hours that jobs held, lost work included
    gpu_utilization: float  # gpu_hours_used ÷ GPU-hours billed
    peak_instances: int
    decisions: int  # scaling-decider calls
    virtual_end_s: float  # virtual time when the last instance went away
    wall_seconds: float
    moves: int = 0  # trials moved by consolidation or spot first, or yielding to new work
    yields: int = 0  # the moves that gave a long trial's slots to new work waiting for a boot
    yield_wait_gpu_hours: float = 0.0  # GPU-hours the yielding trials waited to run again (the wait they took on)
    moving_gpu_hours: float = 0.0  # GPU-hours moved trials spent checkpointing and restoring
    # the second bound: GPU-hours of the trace's work × the cheapest allowed price per GPU-hour (perfect packing)
    packed_bound_cost: float = 0.0
    cost_per_gpu_hour: float = 0.0  # cost ÷ GPU-hours of the trace's work
    cheapest_gpu_hour_price: float = 0.0
    big_job_types: dict[str, int] | None = None  # instance types the 8-GPU (and larger) jobs started on

    def to_dict(self) -> dict[str, object]:
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in asdict(self).items()}


# (key, label, format) in print order; formats are str.format specs
ROWS: list[tuple[str, str, str]] = [
    ("instance_hours", "instance-hours", "{:,.1f}"),
    ("lower_bound_instance_hours", "lower bound (instance-hours)", "{:,.1f}"),
    ("cost_ratio", "cost ratio (÷ lower bound)", "{:.3f}"),
    ("cost", "cost (USD)", "{:,.0f}"),
    ("spot_instance_hours", "  spot instance-hours", "{:,.1f}"),
    ("idle_instance_hours", "idle instance-hours (boot incl.)", "{:,.1f}"),
    ("boot_instance_hours", "  of which booting", "{:,.1f}"),
    ("gpu_utilization", "GPU utilization", "{:.1%}"),
    ("queue_p50_s", "queue p50 (s)", "{:,.1f}"),
    ("queue_p95_s", "queue p95 (s)", "{:,.1f}"),
    ("queue_max_s", "queue max (s)", "{:,.1f}"),
    ("launches", "launches", "{:,}"),
    ("spot_launches", "  of which spot", "{:,}"),
    ("peak_instances", "peak instances", "{:,}"),
    ("jobs", "jobs", "{:,}"),
    ("jobs_finished", "jobs finished", "{:,}"),
    ("jobs_never_fit", "jobs never fit", "{:,}"),
    ("jobs_unfinished", "jobs unfinished", "{:,}"),
    ("interruptions", "spot interruptions", "{:,}"),
    ("jobs_requeued", "jobs requeued", "{:,}"),
    ("lost_work_hours", "lost work (GPU-hours)", "{:,.1f}"),
    ("moves", "trials moved", "{:,}"),
    ("yields", "  of which yielded to new work", "{:,}"),
    ("yield_wait_gpu_hours", "  GPU-hours they waited to resume", "{:,.1f}"),
    ("moving_gpu_hours", "  GPU-hours spent moving", "{:,.1f}"),
    ("packed_bound_cost", "packed bound (USD)", "{:,.0f}"),
    ("cost_per_gpu_hour", "cost per GPU-hour (USD)", "{:.3f}"),
    ("cheapest_gpu_hour_price", "  cheapest allowed (USD)", "{:.3f}"),
    ("decisions", "decider calls", "{:,}"),
    ("wall_seconds", "wall time (s)", "{:.2f}"),
]
