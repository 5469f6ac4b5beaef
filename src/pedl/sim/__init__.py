"""pedl's simulator: the production scheduler and scaling decider on virtual time, against a
simulated cloud (boot delays, prices, spot capacity and interruptions), replaying a job trace."""

from pedl.sim.cloud import CloudSettings
from pedl.sim.pool import SimPool, default_pool, pool_from_master_config
from pedl.sim.results import PolicyResult
from pedl.sim.simulation import SimReport, replay_jobs, simulate
from pedl.sim.trace import TraceJob, TraceSummary, Window, load_trace, parse_window

__all__ = [
    "CloudSettings",
    "PolicyResult",
    "SimPool",
    "SimReport",
    "TraceJob",
    "TraceSummary",
    "Window",
    "default_pool",
    "load_trace",
    "parse_window",
    "pool_from_master_config",
    "replay_jobs",
    "simulate",
]
