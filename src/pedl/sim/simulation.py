"""One simulator run: load the trace, compute its lower bound once, replay it under each policy with
the same pool and cloud settings, and gather the figures the CLI and the benchmark print."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pedl.scheduling.pool_policy import Policy
from pedl.sim.cloud import CloudSettings
from pedl.sim.lower_bound import lower_bound_instance_hours
from pedl.sim.pool import SimPool
from pedl.sim.replay import Replay
from pedl.sim.results import PolicyResult
from pedl.sim.trace import TraceJob, TraceSummary, Window, load_trace


@dataclass
class SimReport:
    trace: TraceSummary
    pool: SimPool
    settings: CloudSettings
    results: dict[str, PolicyResult] = field(default_factory=dict)

    def notes(self) -> list[str]:
        out = self.trace.notes()
        first = self.pool.scaling.types[0]
        out.append(
            f"lower bound: ∫ ceil(GPUs demanded / {first.slots}) dt ({first.name}, the first type), "
            "trace run times, no queueing, jobs that fit the pool"
        )
        out.append("idle instance-hours: billed time with no job on the instance, booting included")
        out.append(
            "queue: arrival to first start (a job requeued after an interruption waits again, not counted there)"
        )
        if "determined" in self.results and len(self.pool.scaling.types) > 1:
            out.append(f"the Determined-style policy uses one type: {first.name}")
        return out

    def to_dict(self) -> dict[str, object]:
        return {
            "trace": self.trace.to_dict(),
            "pool": self.pool.to_dict(),
            "cloud": asdict(self.settings),
            "notes": self.notes(),
            "policies": {k: r.to_dict() for k, r in self.results.items()},
        }


def fits_pool(slots: int, pool: SimPool) -> bool:
    """Whether some allowed type can hold the job: within one instance, or as a gang of whole
    instances (the decider's rule; jobs that fail it are the ones it reports as never fitting)."""
    for offer in pool.scaling.types:
        if slots == 0 or (0 < slots <= offer.slots):
            return True
        if offer.slots > 0 and slots % offer.slots == 0 and slots // offer.slots <= pool.scaling.max_instances:
            return True
    return False


def replay_jobs(
    jobs: list[TraceJob], pool: SimPool, settings: CloudSettings, policies: list[Policy]
) -> dict[str, PolicyResult]:
    gpus_per_instance = max(pool.scaling.types[0].slots, 1)
    bound = lower_bound_instance_hours([j for j in jobs if fits_pool(j.slots, pool)], gpus_per_instance)
    return {p: Replay(jobs, pool, settings, p, bound).run() for p in policies}


def simulate(
    trace: str | Path,
    pool: SimPool,
    settings: CloudSettings,
    policies: list[Policy],
    *,
    window: Window | None = None,
    include_cpu_jobs: bool = False,
) -> SimReport:
    jobs, summary = load_trace(trace, window, include_cpu_jobs=include_cpu_jobs)
    report = SimReport(summary, pool, settings)
    report.results = replay_jobs(jobs, pool, settings, policies)
    return report
