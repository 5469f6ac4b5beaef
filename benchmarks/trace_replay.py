"""Cost on a replayed trace: the whole Alibaba openb trace (149 days) through pedl.sim, pedl's policy
and the Determined-style baseline on the same types, then pedl alone on other type lists; each run
gives instance-hours ÷ the lower bound, cost, idle time and queueing (provisioning.md, "Figures")."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from benchmarks.harness import Figure, add_common_args, run_main
from pedl.sim import (
    CloudSettings,
    SimPool,
    TraceJob,
    default_pool,
    load_trace,
    parse_window,
    replay_jobs,
)
from pedl.sim.pool import override
from pedl.sim.results import PolicyResult

NAME = "trace_replay"
DEFAULT_TRACE = Path(__file__).resolve().parents[2] / "shared" / "traces" / "openb_pod_list_default.csv"

# (key, label, unit, scale) of the figures reported per run
FIGURES = [
    ("cost_ratio", "instance-hours ÷ lower bound", "×", 1.0),
    ("instance_hours", "instance-hours", "h", 1.0),
    ("lower_bound_instance_hours", "lower bound", "h", 1.0),
    ("cost", "cost", "USD", 1.0),
    ("idle_instance_hours", "idle instance-hours (boot incl.)", "h", 1.0),
    ("gpu_utilization", "GPU utilization", "%", 100.0),
    ("queue_p50_s", "queue p50", "s", 1.0),
    ("queue_p95_s", "queue p95", "s", 1.0),
    ("queue_max_s", "queue max", "s", 1.0),
    ("launches", "launches", "", 1.0),
    ("interruptions", "spot interruptions", "", 1.0),
    ("lost_work_hours", "work lost to interruptions", "GPU-h", 1.0),
    ("jobs_never_fit", "jobs never fit", "", 1.0),
    ("wall_seconds", "replay wall time", "s", 1.0),
]


def figures_of(label: str, result: PolicyResult) -> list[Figure]:
    out = []
    for key, name, unit, scale in FIGURES:
        detail = ""
        if key == "cost_ratio":
            detail = f"{result.cost_ratio:.4f}; {result.jobs} jobs, {result.decisions} decider calls"
        elif key == "cost" and result.spot_instance_hours:
            detail = f"{result.spot_instance_hours:,.0f} of the instance-hours on spot"
        out.append(Figure(NAME, f"{label}, {result.policy}: {name}", getattr(result, key) * scale, unit, detail))
    return out


def run(jobs: list[TraceJob], pool: SimPool, settings: CloudSettings, policies: list, label: str) -> list[Figure]:
    results = replay_jobs(jobs, pool, settings, policies)
    return [f for r in results.values() for f in figures_of(label, r)]


def measure(args: argparse.Namespace) -> list[Figure]:
    started = time.perf_counter()
    jobs, summary = load_trace(args.trace, parse_window(args.window))
    settings = CloudSettings(boot_delay=args.boot_delay, seed=args.seed)
    base = override(default_pool(), instance_types_=args.instance_types.split(","), max_idle=args.idle)
    figures = [Figure(NAME, "jobs replayed", summary.jobs, "", "; ".join(summary.notes()[1:]))]
    both = ["pedl", "determined"]
    figures += run(jobs, base, settings, both, args.instance_types)
    for types in args.also:
        figures += run(jobs, override(base, instance_types_=types.split(",")), settings, ["pedl"], types)
    if args.spot:
        figures += run(jobs, override(base, spot=True), settings, both, f"{args.instance_types} spot")
    figures.append(
        Figure(NAME, "total wall time", time.perf_counter() - started, "s", "loading the trace and every replay")
    )
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.trace_replay", description=__doc__)
    p.add_argument("--trace", default=str(DEFAULT_TRACE), help=f"pod list CSV (default {DEFAULT_TRACE})")
    p.add_argument("--window", default=None, help="START:END by arrival (default: the whole trace)")
    p.add_argument(
        "--instance-types", default="p3.8xlarge", help="comma-separated types for both policies (default p3.8xlarge)"
    )
    p.add_argument(
        "--also",
        nargs="*",
        default=["g5.xlarge,p3.8xlarge", "p3.2xlarge,p3.8xlarge"],
        help="more type lists, replayed with pedl's policy only",
    )
    p.add_argument(
        "--no-spot", dest="spot", action="store_false", help="skip the spot run of both policies (default: run it)"
    )
    p.add_argument("--idle", type=float, default=300.0, help="max idle period in seconds (default 300)")
    p.add_argument("--boot-delay", type=float, default=90.0, help="median boot delay in seconds (default 90)")
    p.add_argument("--seed", type=int, default=0)
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()
