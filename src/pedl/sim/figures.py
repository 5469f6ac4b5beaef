"""The figures of one finished replay: billed, idle and boot time, cost against both bounds, queueing,
interruptions, moves and lost work."""

from __future__ import annotations

import math
from typing import Any

from pedl.sim.jobs import JobState
from pedl.sim.results import PolicyResult, percentile


def policy_result(replay: Any, end: float, wall: float) -> PolicyResult:
    """`replay`: a finished sim.replay.Replay (not imported: it imports this); `end`: the virtual time
    the replay ended; `wall`: the seconds it took."""
    everyone = replay.gone + list(replay.instances.values())
    billed = sum(i.billed_seconds(end) for i in everyone)
    busy = sum(i.busy_seconds + (end - i.busy_since if i.busy_since is not None else 0.0) for i in everyone)
    gpu_billed = sum(i.billed_seconds(end) * i.slots for i in everyone)
    hours = billed / 3600.0
    lb = replay.lower_bound_hours
    cost = sum(i.billed_seconds(end) * i.price for i in everyone) / 3600.0
    # the work the trace asks for, and the least a GPU-hour can cost among the allowed types
    work = sum(j.trace.slots * j.trace.run_time for j in replay._all_jobs.values() if j.state == JobState.DONE) / 3600.0
    fraction = replay.settings.spot_price_fraction if replay.policy.spot else 1.0
    cheapest = min((o.price * fraction / o.slots for o in replay.policy.types if o.slots > 0), default=0.0)
    return PolicyResult(
        policy=replay.kind,
        instance_types=[o.name for o in replay.policy.types],
        instance_hours=hours,
        cost=cost,
        spot_instance_hours=sum(i.billed_seconds(end) for i in everyone if i.spot) / 3600.0,
        lower_bound_instance_hours=lb,
        cost_ratio=hours / lb if lb > 0 else math.nan,
        idle_instance_hours=(billed - busy) / 3600.0,
        boot_instance_hours=sum(i.boot_seconds(end) for i in everyone) / 3600.0,
        queue_p50_s=percentile(replay.queue_delays, 50),
        queue_p95_s=percentile(replay.queue_delays, 95),
        queue_max_s=max(replay.queue_delays, default=0.0),
        launches=replay.launches,
        spot_launches=replay.spot_launches,
        spot_requests_cancelled=replay.spot_cancelled,
        jobs=len(replay.trace_jobs),
        jobs_finished=replay.finished,
        jobs_never_fit=replay.never_fit,
        jobs_unfinished=len(replay.trace_jobs) - replay.finished - replay.never_fit,
        interruptions=replay.interruptions,
        jobs_requeued=replay.requeued,
        lost_work_hours=replay.lost_gpu_seconds / 3600.0,
        gpu_hours_used=replay.used_gpu_seconds / 3600.0,
        gpu_utilization=replay.used_gpu_seconds / gpu_billed if gpu_billed > 0 else 0.0,
        peak_instances=replay.peak_instances,
        decisions=replay.decisions,
        virtual_end_s=end,
        wall_seconds=wall,
        moves=replay.moves,
        moving_gpu_hours=replay.moving_gpu_seconds / 3600.0,
        yields=replay.yields,
        yield_wait_gpu_hours=replay.yield_wait_gpu_seconds / 3600.0,
        packed_bound_cost=work * cheapest,
        cost_per_gpu_hour=cost / work if work > 0 else 0.0,
        cheapest_gpu_hour_price=cheapest,
        big_job_types=dict(sorted(replay.big_job_types.items())),
    )
