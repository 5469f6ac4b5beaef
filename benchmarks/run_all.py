"""`make bench`: run every benchmark with its default sizes (or small ones with --quick) and print
one markdown table of the figures."""

from __future__ import annotations

import argparse
import time
from types import ModuleType

from benchmarks import (
    asha_vs_random,
    chart_reads,
    experiment_create,
    front_door_stall,
    harness_overhead,
    metric_ingestion,
    move_cost,
    provisioner_pass,
    provisioner_reaction,
    recovery,
    scheduling_pass,
    task_start_latency,
    webui_experiment_page,
    webui_experiments_list,
    webui_idle_cpu,
)
from benchmarks.harness import Figure, report

BENCHMARKS: dict[str, ModuleType] = {
    "task_start_latency": task_start_latency,
    "experiment_create": experiment_create,
    "metric_ingestion": metric_ingestion,
    "scheduling_pass": scheduling_pass,
    "provisioner_reaction": provisioner_reaction,
    "provisioner_pass": provisioner_pass,
    "asha_vs_random": asha_vs_random,
    "recovery": recovery,
    "move_cost": move_cost,
    "harness_overhead": harness_overhead,
    "chart_reads": chart_reads,
    "webui_experiment_page": webui_experiment_page,
    "webui_experiments_list": webui_experiments_list,
    "webui_idle_cpu": webui_idle_cpu,
    "front_door_stall": front_door_stall,
}

# a smoke run: every path exercised in well under a minute each
QUICK_ARGS: dict[str, list[str]] = {
    "task_start_latency": ["--experiments", "5"],
    "experiment_create": ["--repeat", "1", "--sqlite-only"],
    "metric_ingestion": [
        "--serial-reports",
        "100",
        "--reports-per-thread",
        "25",
        "--raw-rows",
        "1000",
        "--raw-rows-committed",
        "100",
    ],
    "scheduling_pass": ["--agents", "100", "--trials", "1000", "--experiments", "10", "--repeat", "1"],
    "provisioner_reaction": ["--submissions", "10", "--warmup", "1"],
    "provisioner_pass": ["--instances", "100", "--allocations", "1000", "--repeat", "1"],
    "asha_vs_random": ["--trials", "32", "--seeds", "3"],
    "recovery": ["--repetitions", "2"],
    "move_cost": ["--rounds", "1", "--hidden-size", "512"],
    "harness_overhead": ["--small-steps", "300", "--large-steps", "40", "--rounds", "1"],
    "chart_reads": ["--quick", "--repeat", "3", "--db", "sqlite"],
    "webui_experiment_page": ["--trials", "20", "--training", "2000", "--navigations", "3", "--api-repeat", "2"],
    "webui_experiments_list": ["--experiments", "500", "--navigations", "3", "--api-repeat", "3"],
    "webui_idle_cpu": ["--window", "10", "--pages", "1"],
    "front_door_stall": ["--seconds", "5"],
}


def main(argv: list[str] | None = None) -> list[Figure]:
    p = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__)
    p.add_argument("--only", nargs="+", choices=sorted(BENCHMARKS), help="run only these")
    p.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = p.parse_args(argv)
    figures: list[Figure] = []
    for name in args.only or BENCHMARKS:
        module = BENCHMARKS[name]
        print(f"running {name} ...", flush=True)
        started = time.monotonic()
        figures += module.measure(module.parser().parse_args(QUICK_ARGS[name] if args.quick else []))
        print(f"  {name} took {time.monotonic() - started:.0f}s", flush=True)
    report(figures, args.json)
    return figures


if __name__ == "__main__":
    main()
