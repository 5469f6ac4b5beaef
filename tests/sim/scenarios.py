"""Builders for the simulator tests: trace CSV rows, jobs, and replays with fixed boot times."""

from __future__ import annotations

from pathlib import Path

from pedl.scheduling.consolidation import MovePolicy
from pedl.scheduling.pool_policy import Policy, PoolPolicy
from pedl.sim import CloudSettings, SimPool, TraceJob, replay_jobs
from pedl.sim.pool import offers_for
from pedl.sim.results import PolicyResult

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time"
REAL_TRACE = Path(__file__).resolve().parents[3] / "shared" / "traces" / "openb_pod_list_default.csv"
HOUR = 3600.0


def csv_row(
    name: str, gpus: int, created: float | str, deleted: float | str, scheduled: float | str, milli: int = 1000
) -> str:
    return f"{name},1000,1024,{gpus},{milli if gpus else 0},,LS,Running,{created},{deleted},{scheduled}"


def job(name: str, arrival: float, hours: float, gpus: int = 1) -> TraceJob:
    return TraceJob(name, arrival, hours * HOUR, gpus)


def fixed(**kw) -> CloudSettings:
    """No randomness in boots: every boot takes exactly `boot_delay` (0 unless given)."""
    kw.setdefault("boot_delay", 0.0)
    return CloudSettings(boot_delay_sigma=0.0, **kw)


def replay(
    jobs: list[TraceJob],
    *,
    types: tuple[str, ...] = ("g5.xlarge",),
    policy: Policy = "pedl",
    idle: float = 0.0,
    max_instances: int = 10,
    spot: bool = False,
    settings: CloudSettings | None = None,
    moves: MovePolicy | None = None,
    **policy_kw,
) -> PolicyResult:
    scaling = PoolPolicy(
        types=offers_for(list(types)), max_instances=max_instances, max_idle=idle, spot=spot, **policy_kw
    )
    pool = SimPool(scaling) if moves is None else SimPool(scaling, moves=moves)
    return replay_jobs(jobs, pool, settings or fixed(), [policy])[policy]
