"""`pedl sim`: replay a job trace against a simulated cloud with the production scheduler and scaling
decider on virtual time, and print cost and queueing figures for pedl's policy and Determined's."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from pedl.cli.output import JsonFlag, out, print_json, print_table
from pedl.errors import InvalidArgument

if TYPE_CHECKING:
    from pedl.sim import SimReport


def _duration(option: str, value: str) -> float:
    from pedl.config.durations import parse_duration

    try:
        return parse_duration(value)
    except ValueError as exc:
        raise InvalidArgument(f"{option}: {exc}") from None


def _fraction(option: str, value: float) -> float:
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{option}: {value:g} is not between 0 and 1")
    return value


def _trace(argument: str | None, option: str | None) -> str:
    """The trace, given as the argument (`pedl sim FILE`) or with `--trace FILE`."""
    if argument and option and argument != option:
        raise InvalidArgument(f"two traces given: {argument} and --trace {option}; give one")
    trace = argument or option
    if not trace:
        raise InvalidArgument("missing the trace: pedl sim TRACE.csv (or --trace TRACE.csv), a pod list CSV")
    if not Path(trace).is_file():
        raise InvalidArgument(f"{'TRACE' if argument else '--trace'}: no such file {trace!r}")
    return trace


# a move's costs as `python -m benchmarks.move_cost` measured them (a 26M-parameter PyTorch trial, its 79 MB
# checkpoint on local disk: medians 1.26 s and 2.59 s), rounded up
MEASURED_CHECKPOINT_COST = 2.0
MEASURED_RESTORE_COST = 3.0


def sim(
    trace_file: str | None = typer.Argument(
        None, metavar="TRACE", help="pod list CSV (the openb format of shared/traces)"
    ),
    trace_option: str | None = typer.Option(None, "--trace", help="the trace, as an option"),
    instance_type: list[str] = typer.Option(
        [], "--instance-type", help="allowed type; repeat for several, in order of preference [p3.8xlarge]"
    ),
    max_instances: int | None = typer.Option(None, "--max-instances", help="pool bound [200]"),
    min_instances: int | None = typer.Option(None, "--min-instances", help="pool bound [0]"),
    idle: str | None = typer.Option(None, "--idle", help="max_idle_agent_period, e.g. 5m [5m]"),
    policy: str = typer.Option("both", "--policy", help="pedl, determined, or both side by side"),
    window: str | None = typer.Option(None, "--window", help="START:END by arrival, seconds or durations (10d:20d)"),
    spot: bool | None = typer.Option(None, "--spot/--no-spot", help="launch spot instances [no]"),
    seed: int = typer.Option(0, "--seed", help="seed of the boot-delay, capacity and interruption draws"),
    boot_delay: str | None = typer.Option(None, "--boot-delay", help="median boot time (lognormal) [90s]"),
    boot_sigma: float = typer.Option(0.25, "--boot-sigma", help="lognormal shape of the boot time; 0 = fixed"),
    spot_price: float = typer.Option(0.35, "--spot-price", help="spot price as a fraction of on-demand"),
    interruption_rate: float = typer.Option(0.05, "--interruption-rate", help="spot interruptions per instance-hour"),
    spot_failure: float = typer.Option(
        0.05, "--spot-failure", help="chance a spot request finds no capacity (stays open)"
    ),
    checkpoint_period: str = typer.Option(
        "30m",
        "--checkpoint-period",
        help="jobs checkpoint this often; an interrupted job resumes from "
        "its last checkpoint (0 = restarts from scratch)",
    ),
    checkpoint_cost: str | None = typer.Option(
        None,
        "--checkpoint-cost",
        help="time a moved trial spends checkpointing (the source still runs) [2s, measured; --config: its pool's]",
    ),
    restore_cost: str | None = typer.Option(
        None,
        "--restore-cost",
        help="time a moved trial spends restoring on its new instance [3s, measured; --config: its pool's]",
    ),
    consolidation: bool | None = typer.Option(
        None,
        "--consolidation/--no-consolidation",
        help="pedl's policy moves checkpointed trials to empty instances and onto spot [yes]",
    ),
    include_cpu_jobs: bool = typer.Option(
        False, "--include-cpu-jobs", help="also replay 0-GPU pods (they need an agent, no slot)"
    ),
    config: Path | None = typer.Option(
        None, "--config", help="master.yaml: take the pool settings of its first aws or local pool"
    ),
    as_json: JsonFlag = False,
) -> None:
    """Replay a job trace against a simulated cloud with the production scheduler and scaling decider:
    instance-hours, cost, the lower bound, idle time and queueing, for pedl's policy and Determined's."""
    trace = _trace(trace_file, trace_option)
    from pedl.sim import CloudSettings, parse_window, simulate
    from pedl.sim.pool import default_pool, override, policies_for, pool_from_master_config

    policies = policies_for(policy)
    span = parse_window(window)
    base = pool_from_master_config(config) if config is not None else default_pool()
    pool = override(
        base,
        instance_types_=instance_type,
        max_instances=max_instances,
        min_instances=min_instances,
        max_idle=_duration("--idle", idle) if idle is not None else None,
        spot=spot,
        consolidation=consolidation,
        checkpoint_cost=_duration("--checkpoint-cost", checkpoint_cost)
        if checkpoint_cost
        else None
        if config is not None
        else MEASURED_CHECKPOINT_COST,
        restore_cost=_duration("--restore-cost", restore_cost)
        if restore_cost
        else None
        if config is not None
        else MEASURED_RESTORE_COST,
    )
    if boot_sigma < 0:
        raise InvalidArgument(f"--boot-sigma: {boot_sigma:g} is negative")
    if interruption_rate < 0:
        raise InvalidArgument(f"--interruption-rate: {interruption_rate:g} is negative")
    median_boot = (
        _duration("--boot-delay", boot_delay)
        if boot_delay is not None
        else pool.boot_delay
        if pool.boot_delay is not None
        else 90.0
    )
    settings = CloudSettings(
        boot_delay=median_boot,
        boot_delay_sigma=boot_sigma,
        spot_price_fraction=_fraction("--spot-price", spot_price),
        interruption_rate=interruption_rate,
        spot_capacity_failure=_fraction("--spot-failure", spot_failure),
        checkpoint_period=_duration("--checkpoint-period", checkpoint_period),
        seed=seed,
    )
    report = simulate(trace, pool, settings, policies, window=span, include_cpu_jobs=include_cpu_jobs)
    if as_json:
        print_json(report.to_dict())
    else:
        print_report(report)


def print_report(report: SimReport) -> None:
    from pedl.config.durations import format_duration
    from pedl.sim.results import ROWS

    console = out()
    for note in report.notes():
        console.print(f"[dim]{escape(note)}[/dim]")
    pool = report.pool
    names = list(report.results)
    rows = []
    for key, label, spec in ROWS:
        rows.append([label, *(spec.format(getattr(report.results[n], key)) for n in names)])
    # a line of its own: as a table title it would wrap at the (narrow) table's width
    p = pool.scaling
    console.print(
        f"[bold]pedl sim[/bold]: {escape(', '.join(o.name for o in p.types))}, max {p.max_instances}, "
        f"idle {format_duration(round(p.max_idle))}, {'spot' if p.spot else 'on-demand'}",
        soft_wrap=True,
    )
    print_table(["figure", *names], rows)
    for name in names:
        big = report.results[name].big_job_types
        if big:
            console.print(
                f"{name}: 8-GPU jobs started on " + ", ".join(f"{t} ({n})" for t, n in big.items()), soft_wrap=True
            )
