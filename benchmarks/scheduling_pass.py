"""One scheduling pass with 1,000 agents of 8 slots and 10,000 waiting trials: the pure scheduler
function, then the controller's whole pass (tick) against a real database, SQLite and PostgreSQL."""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import event, func, insert, select

from benchmarks.harness import Figure, add_common_args, median, run_main, work_dir
from pedl.clock import SystemClock
from pedl.config.experiment_config import parse_experiment_config
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.cluster.scheduler import AgentSnapshot, SlotRequest, schedule
from pedl.master.db import migrate, models
from pedl.master.db.engine import Database
from pedl.master.lifecycle import AgentState, AllocationState, TrialState
from pedl.master.services.experiments import effective_config
from pedl.master.services.users import ensure_default_users

NAME = "scheduling_pass"
POOL = "default"


def slot_sizes(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def label(sizes: list[int]) -> str:
    return "/".join(str(n) for n in sizes)


# -- (a) the pure function -------------------------------------------------------------------------


def snapshot(agents: int, slots: int) -> list[AgentSnapshot]:
    ids = tuple(str(j) for j in range(slots))
    return [AgentSnapshot(f"agent-{i:05d}", ids, ids) for i in range(agents)]


def requests(trials: int, sizes: list[int]) -> list[SlotRequest]:
    return [SlotRequest(f"{i}.{i}.1", sizes[i % len(sizes)], 42, 1_700_000_000.0 + i) for i in range(trials)]


def measure_pure(args: argparse.Namespace, sizes: list[int]) -> list[Figure]:
    agents, reqs = snapshot(args.agents, args.slots), requests(args.trials, sizes)
    times, placed = [], 0
    for _ in range(args.repeat_pure):
        started = time.perf_counter()
        placed = len(schedule(reqs, agents, "best"))
        times.append(time.perf_counter() - started)
    return [Figure(NAME, f"pure schedule(), trials of {label(sizes)} slot(s)",
                   1000 * median(times), "ms",
                   f"median of {args.repeat_pure}; {placed:,} of {len(reqs):,} placed on "
                   f"{args.agents:,}×{args.slots} slots")]


# -- (b) the controller's pass with its database ---------------------------------------------------


class _NoLoop:
    """Stands in for a connection's event loop: counts the messages the pass sends to agents."""

    def __init__(self) -> None:
        self.sent = 0

    def call_soon_threadsafe(self, *_: Any) -> None:
        self.sent += 1


class TimedController(Controller):
    """The real controller, timing the parts of its pass: agent checks, the plan (one read of the
    snapshot and the pure scheduler) and applying the placements in batches."""

    def __init__(self, **parts: Any) -> None:
        super().__init__(**parts)
        self.phase: dict[str, float] = {"check_agents": 0.0, "plan": 0.0, "apply": 0.0}

    def _timed(self, name: str, fn: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.phase[name] += time.perf_counter() - started

    def _check_agents(self, s) -> None:  # noqa: ANN001
        self._timed("check_agents", super()._check_agents, s)

    def _plan_schedule(self, s):  # noqa: ANN001, ANN202
        return self._timed("plan", super()._plan_schedule, s)

    def _apply(self, s, chunk) -> None:  # noqa: ANN001
        self._timed("apply", super()._apply, s, chunk)


class StatementCounter:
    """Counts the SQL statements (by verb) the engine sends from the thread that enabled it."""

    def __init__(self, engine: Any) -> None:
        self.counts: Counter[str] = Counter()
        self.thread: int | None = None
        event.listen(engine, "before_cursor_execute", self._seen)

    def enable(self, on: bool = True) -> None:
        self.thread = threading.get_ident() if on else None

    def _seen(self, _conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, executemany: bool) -> None:
        if self.thread == threading.get_ident():
            verb = statement.lstrip().split(None, 1)[0].upper()
            self.counts[verb + (" (executemany)" if executemany else "")] += 1

    def summary(self) -> str:
        return ", ".join(f"{n:,} {verb}" for verb, n in self.counts.most_common())


def experiment_yaml(slots: int) -> str:
    return yaml.safe_dump({
        "name": "bench", "entrypoint": "python3 train.py",
        "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
        "searcher": {"name": "random", "metric": "loss", "max_trials": 100, "max_length": {"batches": 100}},
        "resources": {"slots_per_trial": slots}})


def populate(ctl: Controller, args: argparse.Namespace, sizes: list[int], loop: _NoLoop) -> None:
    """1,000 connected agents and 10,000 queued trials with a pending allocation each, in bulk."""
    now = ctl.now
    db = ctl.db
    with db.session() as s:
        ensure_default_users(s, now)
    with db.session() as s:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        configs = {n: effective_config(ctl.config, parse_experiment_config(experiment_yaml(n))) for n in set(sizes)}
        exps = [{"id": e + 1, "name": f"bench {e + 1}", "description": "", "owner_id": owner.id,
                 "state": "STATE_ACTIVE", "config": configs[sizes[e % len(sizes)]],
                 "original_config": experiment_yaml(sizes[e % len(sizes)]),
                 # the searchers made all their trials: the pass schedules those, it creates none (top_up)
                 "searcher_state": {"seed": 0, "state": {"exhausted": True}}, "progress": 0.0,
                 "resource_pool": POOL, "start_time": now, "archived": False, "project_id": 1, "notes": ""}
                for e in range(args.experiments)]
        s.execute(insert(models.Experiment), exps)
        trials, allocs = [], []
        for t in range(args.trials):
            exp = t % args.experiments + 1
            trial_id = t + 1
            task_id = f"{exp}.{trial_id}"
            trials.append({"id": trial_id, "experiment_id": exp, "request_id": f"r{trial_id}", "task_id": task_id,
                           "hparams": {"lr": 0.01}, "seed": t, "state": TrialState.QUEUED.value, "restarts": 0,
                           "run_id": 1, "start_time": now, "total_batches": 0, "summary_metrics": {},
                           "target_length": 100})
            allocs.append({"id": f"{task_id}.1", "task_id": task_id, "trial_id": trial_id,
                           "name": f"Trial {trial_id} (Experiment {exp})", "state": AllocationState.PENDING.value,
                           "resource_pool": POOL, "slots_needed": sizes[(exp - 1) % len(sizes)], "priority": 42,
                           "assignment": [], "session_token_hash": "", "owner_id": owner.id,
                           "queued_at": now - args.trials + t})
        s.execute(insert(models.Trial), trials)
        s.execute(insert(models.Allocation), allocs)
        agents = [{"id": f"agent-{i:05d}", "hostname": f"host-{i}", "address": "10.0.0.1", "resource_pool": POOL,
                   "slots": [{"id": str(j), "type": "cuda", "brand": "bench", "uuid": f"GPU-{i}-{j}",
                              "memory_mib": 81920} for j in range(args.slots)],
                   "state": AgentState.CONNECTED.value, "version": "bench", "registered_at": now,
                   "last_heartbeat": now, "enabled": True, "draining": False}
                  for i in range(args.agents)]
        s.execute(insert(models.Agent), agents)
    for agent in agents:
        connection = AgentConnection(agent["id"], "http://master:8080", "10.0.0.1", loop,  # type: ignore[arg-type]
                                     last_heartbeat=time.time())
        ctl.hub.attach(connection)


class Probe(threading.Thread):
    """What an API request meets while the pass runs: `delay` seconds into it, time how long `fn`
    takes (a request needing the controller lock, or any request's database session)."""

    def __init__(self, fn: Callable[[], object], delay: float) -> None:
        super().__init__(daemon=True)
        self.fn, self.delay = fn, delay
        self.waited: float | None = None
        self.error = ""

    def run(self) -> None:
        time.sleep(self.delay)
        started = time.perf_counter()
        try:
            self.fn()
        except Exception as exc:  # noqa: BLE001 - e.g. SQLite's "database is locked"; reported
            self.error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
        self.waited = time.perf_counter() - started


def _session_probe(db: Database) -> None:
    with db.session() as s:
        s.execute(select(1))


@contextmanager
def database(kind: str, work: Path) -> Iterator[dict | None]:
    if kind == "sqlite":
        yield None
        return
    from tests.support.databases import fresh_postgres_db

    with fresh_postgres_db() as db:
        yield db


def one_pass(kind: str, args: argparse.Namespace, sizes: list[int], work: Path,
             profile: bool) -> tuple[float, dict[str, float], int, int, str, dict[str, Probe], str]:
    with database(kind, work) as db_cfg:
        config = MasterConfig(data_dir=work / "data", db=db_cfg)
        db = Database(config.database_url())
        try:
            migrate.upgrade(db.engine)
            ctl = TimedController(config=config, db=db, clock=SystemClock(), hub=AgentHub(), caller_cache=CallerCache(),
                                  cluster_id="bench")
            loop = _NoLoop()
            populate(ctl, args, sizes, loop)
            profiler = cProfile.Profile() if profile else None
            statements = StatementCounter(db.engine)
            statements.enable()
            probes = {"lock": Probe(lambda: ctl.run(lambda _s: None), args.probe_delay),
                      "session": Probe(lambda: _session_probe(db), args.probe_delay)}
            for probe in probes.values():
                probe.start()
            started = time.perf_counter()
            if profiler:
                profiler.enable()
            ctl.tick()
            if profiler:
                profiler.disable()
            elapsed = time.perf_counter() - started
            statements.enable(False)
            for probe in probes.values():
                probe.join()
            with db.session() as s:
                placed = s.scalar(select(func.count()).select_from(models.Allocation).where(
                    models.Allocation.state == AllocationState.ASSIGNED.value)) or 0
            text = ""
            if profiler:
                out = io.StringIO()
                pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(40)
                text = out.getvalue()
            return elapsed, dict(ctl.phase), placed, loop.sent, statements.summary(), probes, text
        finally:
            db.dispose()
            if kind == "sqlite":
                for p in (work / "data").glob("pedl.db*"):
                    p.unlink()


def measure_controller(kind: str, args: argparse.Namespace, sizes: list[int]) -> list[Figure]:
    runs: list[tuple[float, dict[str, float], int, int]] = []
    statements = ""
    probes: list[dict[str, Probe]] = []
    with work_dir(f"sched-{kind}", args.keep) as work:
        for i in range(args.repeat):
            elapsed, phase, placed, sent, statements, probe, text = one_pass(kind, args, sizes, work,
                                                                              args.profile and i == 0)
            probes.append(probe)
            runs.append((elapsed, phase, placed, sent))
            if text:
                print(f"--- cProfile of one {kind} pass ---\n{text}")
    db_name = "SQLite" if kind == "sqlite" else "PostgreSQL"
    totals = [r[0] for r in runs]
    check = median([r[1].get("check_agents", 0.0) for r in runs])
    plan = median([r[1].get("plan", 0.0) for r in runs])
    apply = median([r[1].get("apply", 0.0) for r in runs])
    total = median(totals)
    placed, sent = runs[0][2], runs[0][3]
    shape = f"{args.agents:,} agents×{args.slots}, {args.trials:,} pending in {args.experiments} experiments"
    return [
        Figure(NAME, f"{db_name}: controller.tick(), trials of {label(sizes)} slot(s)", 1000 * total, "ms",
               f"median of {args.repeat} (fresh database each); {shape}; {placed:,} placed, {sent:,} start_task sent"),
        Figure(NAME, f"{db_name}: … of which _check_agents", 1000 * check, "ms",
               "heartbeat bookkeeping of every agent"),
        Figure(NAME, f"{db_name}: … of which planning", 1000 * plan, "ms",
               "one snapshot read (pending, agents, held allocations) and the pure scheduler"),
        Figure(NAME, f"{db_name}: … of which applying", 1000 * apply, "ms",
               "placements in batches: bulk row loads, tokens, events, task specs (before each commit)"),
        Figure(NAME, f"{db_name}: … of which commits + sending", 1000 * (total - check - plan - apply), "ms",
               "the transactions' flush/commit and handing start_task to connections"),
        _probe_figure(db_name, "a request needing the controller lock waits", [p["lock"] for p in probes], args),
        _probe_figure(db_name, "a request's database session waits", [p["session"] for p in probes], args),
        Figure(NAME, f"{db_name}: per placed trial", 1000 * total / max(placed, 1), "ms",
               f"SQL statements in the pass: {statements}"),
    ]


def _probe_figure(db_name: str, what: str, probes: list[Probe], args: argparse.Namespace) -> Figure:
    waited = median([p.waited or 0.0 for p in probes])
    errors = sorted({p.error for p in probes if p.error})
    detail = f"started {args.probe_delay:g}s into the pass; " + ("; ".join(errors) if errors else "succeeded")
    return Figure(NAME, f"{db_name}: {what}", 1000 * waited, "ms", detail)


def measure(args: argparse.Namespace) -> list[Figure]:
    figures: list[Figure] = []
    scenarios = [slot_sizes(x) for x in args.trial_slots]
    for sizes in scenarios:
        figures += measure_pure(args, sizes)
    sizes = scenarios[0]
    for kind in args.db:
        if kind == "postgres":
            from tests.support.databases import postgres_error

            problem = postgres_error()
            if problem:
                print(f"skipping PostgreSQL: {problem}")
                continue
        figures += measure_controller(kind, args, sizes)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.scheduling_pass", description=__doc__)
    p.add_argument("--agents", type=int, default=1000, help="agents (default 1000)")
    p.add_argument("--slots", type=int, default=8, help="slots per agent (default 8)")
    p.add_argument("--trials", type=int, default=10000, help="waiting trials (default 10000)")
    p.add_argument("--experiments", type=int, default=100, help="experiments the trials belong to (default 100)")
    p.add_argument("--trial-slots", nargs="+", default=["1", "1,2,4,8,16", "0"],
                   help="scenarios for the pure function: comma lists of slots_per_trial, cycled over the "
                        "trials; the first is also the controller's (default: 1  1,2,4,8,16  0)")
    p.add_argument("--repeat-pure", type=int, default=5, help="runs of the pure function (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="controller passes, each on a fresh database (default 3)")
    p.add_argument("--db", nargs="*", choices=["sqlite", "postgres"], default=["sqlite", "postgres"],
                   help="databases for the controller pass; none to time only the pure function")
    p.add_argument("--probe-delay", type=float, default=0.5,
                   help="seconds into the pass at which the probes make their requests (default 0.5)")
    p.add_argument("--profile", action="store_true", help="print a cProfile of the first controller pass")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()
