"""The scheduling pass, against a real database (SQLite and PostgreSQL), in three shapes:
- the large pass: 1,000 agents of 8 slots and 10,000 waiting trials (8,000 placed);
- one new trial with 1,000 idle agents, and one new trial with the agents' slots all but full of
  running trials (each after a first pass, as a master runs them: one pass per new experiment);
and what a concurrent API request waits meanwhile: GET /api/v1/me through the app, a request that
takes the cluster lock, and one that opens a writing session. Also the pure scheduler function alone.
It prints figures; it asserts nothing."""

from __future__ import annotations

import argparse
import gc
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from sqlalchemy import event, func, insert, select

from benchmarks.harness import Figure, add_common_args, median, percentile, run_main, work_dir
from pedl.clock import SystemClock
from pedl.config.experiment_config import parse_experiment_config
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.db import migrate, models
from pedl.master.db.engine import Database
from pedl.master.experiments.service import effective_config
from pedl.master.identity.passwords import client_hash
from pedl.master.identity.users import ensure_default_users
from pedl.master.lifecycle.states import AgentState, AllocationState, TrialState
from pedl.master.server import tune_runtime
from pedl.scheduling.scheduler import AgentSnapshot, SlotRequest, schedule

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
    return [
        Figure(
            NAME,
            f"pure schedule(), trials of {label(sizes)} slot(s)",
            1000 * median(times),
            "ms",
            f"median of {args.repeat_pure}; {placed:,} of {len(reqs):,} placed on {args.agents:,}×{args.slots} slots",
        )
    ]


# -- (b) the controller's pass with its database ---------------------------------------------------


class _NoLoop:
    """Stands in for a connection's event loop: counts the messages the pass sends to agents."""

    def __init__(self) -> None:
        self.sent = 0

    def call_soon_threadsafe(self, *_: Any) -> None:
        self.sent += 1


class TimedController(Controller):
    """The real controller, timing the parts of its pass (agent checks, top-up; the plan: snapshot
    read and pure decision, and preparing each batch of placements, outside the lock; writing the
    batches under it) and how long each of the pass's transactions holds the cluster lock."""

    PHASES = ("check_agents", "top_up", "plan", "prepare", "apply")

    def __init__(self, **parts: Any) -> None:
        super().__init__(**parts)
        self.phase: dict[str, float] = dict.fromkeys(self.PHASES, 0.0)
        self.cpu: dict[str, float] = dict.fromkeys(self.PHASES, 0.0)  # the pass thread's CPU time
        self.holds: list[float] = []
        self.pass_thread: int | None = None
        self.pass_cpu = 0.0

    def reset(self) -> None:
        self.phase = dict.fromkeys(self.PHASES, 0.0)
        self.cpu = dict.fromkeys(self.PHASES, 0.0)
        self.holds = []

    def run(self, fn: Callable[[Any], object]) -> object:
        if threading.get_ident() != self.pass_thread:
            return super().run(fn)
        with self.lock:  # reentrant: the time from taking the lock to delivering the messages
            started = time.perf_counter()
            try:
                return super().run(fn)
            finally:
                self.holds.append(time.perf_counter() - started)

    def _timed(self, name: str, fn: Any, *args: Any) -> Any:
        started, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args)
        finally:
            self.phase[name] += time.perf_counter() - started
            self.cpu[name] += time.thread_time() - cpu

    def _check_agents(self, s) -> None:
        self._timed("check_agents", super()._check_agents, s)

    def _top_up(self, s) -> None:
        self._timed("top_up", super()._top_up, s)

    def _plan_schedule(self):
        return self._timed("plan", super()._plan_schedule)

    def _prepare(self, decided, chunk, cache):
        return self._timed("prepare", super()._prepare, decided, chunk, cache)

    def _apply(self, s, ready) -> None:
        self._timed("apply", super()._apply, s, ready)

    def timed_tick(self) -> float:
        self.pass_thread = threading.get_ident()
        started, cpu = time.perf_counter(), time.thread_time()
        self.tick()
        self.pass_cpu = time.thread_time() - cpu
        return time.perf_counter() - started


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
    return yaml.safe_dump(
        {
            "name": "bench",
            "entrypoint": "python3 train.py",
            "hyperparameters": {"lr": {"type": "double", "minval": 0.001, "maxval": 0.1}},
            "searcher": {"name": "random", "metric": "loss", "max_trials": 100, "max_length": {"batches": 100}},
            "resources": {"slots_per_trial": slots},
        }
    )


@dataclass
class Cluster:
    """A populated database with its controller and connected agents."""

    ctl: TimedController
    db: Database
    config: MasterConfig
    loop: _NoLoop
    owner_id: int
    next_trial: int
    sizes: list[int]
    connections: list[AgentConnection] = field(default_factory=list)
    beats: int = 0

    def heartbeat(self) -> None:
        """A fifth of the agents heartbeat: agents beat every 5 s and a master passes about once a
        second (without beats, agents silent for 15 s would be disconnected in the middle of a run)."""
        now = self.ctl.now
        for conn in self.connections[self.beats % 5 :: 5]:
            conn.last_heartbeat = now
        self.beats += 1


def populate(
    ctl: TimedController, args: argparse.Namespace, sizes: list[int], *, pending: int, running: int
) -> Cluster:
    """args.agents connected agents, `pending` queued trials with a pending allocation each, and
    `running` running trials filling the agents' slots in order, in bulk."""
    now = ctl.now
    db = ctl.db
    with db.session() as s:
        ensure_default_users(s, now)
    with db.session() as s:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        configs = {n: effective_config(ctl.config, parse_experiment_config(experiment_yaml(n))) for n in set(sizes)}
        exps = [
            {
                "id": e + 1,
                "name": f"bench {e + 1}",
                "description": "",
                "owner_id": owner.id,
                "state": "STATE_ACTIVE",
                "config": configs[sizes[e % len(sizes)]],
                "original_config": experiment_yaml(sizes[e % len(sizes)]),
                # the searchers made all their trials: the pass schedules those, it creates none (top_up)
                "searcher_state": {"seed": 0, "state": {"exhausted": True}},
                "progress": 0.0,
                "resource_pool": POOL,
                "start_time": now,
                "archived": False,
                "project_id": 1,
                "notes": "",
            }
            for e in range(args.experiments)
        ]
        s.execute(insert(models.Experiment), exps)
        trials, allocs = [], []
        for t in range(pending + running):
            exp = t % args.experiments + 1
            trial_id = t + 1
            task_id = f"{exp}.{trial_id}"
            runs = t < running
            trials.append(
                {
                    "id": trial_id,
                    "experiment_id": exp,
                    "request_id": f"r{trial_id}",
                    "task_id": task_id,
                    "hparams": {"lr": 0.01},
                    "seed": t,
                    "state": (TrialState.RUNNING if runs else TrialState.QUEUED).value,
                    "restarts": 0,
                    "run_id": 1,
                    "start_time": now,
                    "total_batches": 0,
                    "summary_metrics": {},
                    "target_length": 100,
                }
            )
            alloc = {
                "id": f"{task_id}.1",
                "task_id": task_id,
                "trial_id": trial_id,
                "name": f"Trial {trial_id} (Experiment {exp})",
                "state": (AllocationState.RUNNING if runs else AllocationState.PENDING).value,
                "resource_pool": POOL,
                "slots_needed": sizes[(exp - 1) % len(sizes)],
                "priority": 42,
                "assignment": [],
                "session_token_hash": "",
                "owner_id": owner.id,
                "queued_at": now - (pending + running) + t,
                "assigned_at": None,
                "started_at": None,
            }
            if runs:  # one slot each, the agents' slots in order
                place = {"agent_id": f"agent-{t // args.slots:05d}", "slot_ids": [str(t % args.slots)]}
                alloc.update(slots_needed=1, assigned_at=now, started_at=now, assignment=[place])
            allocs.append(alloc)
        if trials:
            s.execute(insert(models.Trial), trials)
            s.execute(insert(models.Allocation), allocs)
        agents = [
            {
                "id": f"agent-{i:05d}",
                "hostname": f"host-{i}",
                "address": "10.0.0.1",
                "resource_pool": POOL,
                "slots": [
                    {"id": str(j), "type": "cuda", "brand": "bench", "uuid": f"GPU-{i}-{j}", "memory_mib": 81920}
                    for j in range(args.slots)
                ],
                "state": AgentState.CONNECTED.value,
                "version": "bench",
                "registered_at": now,
                "last_heartbeat": now,
                "enabled": True,
                "draining": False,
            }
            for i in range(args.agents)
        ]
        s.execute(insert(models.Agent), agents)
        owner_id = owner.id
    loop = _NoLoop()
    connections = [
        AgentConnection(
            agent["id"],
            "http://master:8080",
            "10.0.0.1",
            loop,  # type: ignore[arg-type]
            last_heartbeat=now,
        )
        for agent in agents
    ]
    for connection in connections:
        ctl.hub.attach(connection)
    return Cluster(ctl, db, ctl.config, loop, owner_id, pending + running + 1, sizes, connections)


def add_trial(c: Cluster) -> None:
    """One new 1-slot trial of experiment 1, queued as a new experiment's first trial is."""
    now, trial_id = c.ctl.now, c.next_trial
    c.next_trial += 1
    task_id = f"1.{trial_id}"
    with c.db.session() as s:
        s.execute(
            insert(models.Trial),
            [
                {
                    "id": trial_id,
                    "experiment_id": 1,
                    "request_id": f"r{trial_id}",
                    "task_id": task_id,
                    "hparams": {"lr": 0.01},
                    "seed": trial_id,
                    "state": TrialState.QUEUED.value,
                    "restarts": 0,
                    "run_id": 1,
                    "start_time": now,
                    "total_batches": 0,
                    "summary_metrics": {},
                    "target_length": 100,
                }
            ],
        )
        s.execute(
            insert(models.Allocation),
            [
                {
                    "id": f"{task_id}.1",
                    "task_id": task_id,
                    "trial_id": trial_id,
                    "name": f"Trial {trial_id} (Experiment 1)",
                    "state": AllocationState.PENDING.value,
                    "resource_pool": POOL,
                    "slots_needed": 1,
                    "priority": 42,
                    "assignment": [],
                    "session_token_hash": "",
                    "owner_id": c.owner_id,
                    "queued_at": now,
                }
            ],
        )


# -- what concurrent requests wait -----------------------------------------------------------------


@dataclass
class Probe:
    """One kind of request, made again and again while the passes run: (start, seconds) of each."""

    name: str
    fn: Callable[[], object]
    samples: list[tuple[float, float]] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)

    def call(self) -> None:
        started = time.perf_counter()
        try:
            self.fn()
        except Exception as exc:  # e.g. SQLite's "database is locked"; reported
            self.errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:80]}"] += 1
        self.samples.append((started, time.perf_counter() - started))

    def during(self, windows: list[tuple[float, float]]) -> list[float]:
        """The durations of the requests that overlapped a pass."""
        return [d for s, d in self.samples if any(s < b and s + d > a for a, b in windows)]

    def outside(self, windows: list[tuple[float, float]]) -> list[float]:
        return [d for s, d in self.samples if not any(s < b and s + d > a for a, b in windows)]


class Prober:
    """A thread per probe, each making its request every `interval` seconds until stopped."""

    def __init__(self, probes: list[Probe], interval: float) -> None:
        self.probes, self.interval = probes, interval
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._loop, args=(p,), daemon=True) for p in probes]

    def _loop(self, probe: Probe) -> None:
        while not self.stop.is_set():
            probe.call()
            self.stop.wait(self.interval)

    def __enter__(self) -> Prober:
        for t in self.threads:
            t.start()
        time.sleep(max(0.3, 10 * self.interval))  # requests alone first: the baseline
        return self

    def __exit__(self, *_: object) -> None:
        time.sleep(2 * self.interval)
        self.stop.set()
        for t in self.threads:
            t.join()


class ApiProbe:
    """GET /api/v1/me through the master's app (its routes, middleware and auth; no lifespan, so no
    control loop of its own), as a logged-in user, over httpx's ASGI transport in a loop of its own."""

    def __init__(self, config: MasterConfig, db: Database) -> None:
        import asyncio

        import httpx

        from pedl.master.app import create_app

        self._loop = asyncio.new_event_loop()
        app = create_app(config, clock=SystemClock(), db=db)
        self._client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://master")
        r = self._run(
            self._client.post(
                "/api/v1/auth/login", json={"username": "determined", "password": client_hash(""), "isHashed": True}
            )
        )
        r.raise_for_status()
        self._headers = {"Authorization": f"Bearer {r.json()['token']}"}

    def _run(self, coro: Any) -> Any:
        return self._loop.run_until_complete(coro)

    def __call__(self) -> None:
        r = self._run(self._client.get("/api/v1/me", headers=self._headers))
        if r.status_code != 200:
            raise RuntimeError(f"GET /api/v1/me answered {r.status_code}")

    def close(self) -> None:
        self._run(self._client.aclose())
        self._loop.close()


def _write_session(db: Database) -> None:
    with db.session() as s:  # on SQLite: BEGIN IMMEDIATE, SQLite's write lock
        s.execute(select(1))


def probes_for(ctl: TimedController, api: ApiProbe) -> list[Probe]:
    return [
        Probe("GET /api/v1/me through the app", api),
        Probe("a request taking the cluster lock", lambda: ctl.run(lambda _s: None)),
        Probe("a request opening a writing session", lambda: _write_session(ctl.db)),
    ]


@contextmanager
def database(kind: str) -> Iterator[dict | None]:
    if kind == "sqlite":
        yield None
        return
    from tests.support.databases import fresh_postgres_db

    with fresh_postgres_db() as db:
        yield db


@contextmanager
def cluster(
    kind: str, args: argparse.Namespace, sizes: list[int], work: Path, *, pending: int, running: int
) -> Iterator[tuple[Cluster, ApiProbe]]:
    with database(kind) as db_cfg:
        config = MasterConfig(data_dir=work / "data", db=db_cfg)
        db = Database(config.database_url())
        api = None
        try:
            migrate.upgrade(db.engine)
            ctl = TimedController(
                config=config,
                db=db,
                clock=SystemClock(),
                hub=AgentHub(),
                caller_cache=CallerCache(),
                cluster_id="bench",
            )
            c = populate(ctl, args, sizes, pending=pending, running=running)
            api = ApiProbe(config, db)
            thresholds, interval = gc.get_threshold(), sys.getswitchinterval()
            if args.master_runtime:  # as the master sets it once started (server.tune_runtime)
                tune_runtime()
            if args.gc_threshold:
                gc.set_threshold(args.gc_threshold, *thresholds[1:])
            if args.switch_interval:
                sys.setswitchinterval(args.switch_interval)
            try:
                yield c, api
            finally:
                gc.unfreeze()
                gc.set_threshold(*thresholds)
                sys.setswitchinterval(interval)
        finally:
            if api is not None:
                api.close()
            db.dispose()
            if kind == "sqlite":
                for p in (work / "data").glob("pedl.db*"):
                    p.unlink()


def _profiled(args: argparse.Namespace, fn: Callable[[], float], title: str) -> float:
    if not args.profile:
        return fn()
    from pyinstrument import Profiler

    profiler = Profiler(interval=0.0005)
    profiler.start()
    try:
        return fn()
    finally:
        profiler.stop()
        print(f"--- pyinstrument: {title} ---")
        print(profiler.output_text(unicode=False, color=False, show_all=False))


class GcPauses:
    """The garbage collector's collections while enabled: (generation, seconds) of each. A full
    collection stops every thread of the process, API requests' too."""

    def __init__(self) -> None:
        self.pauses: list[tuple[int, float]] = []
        self._started = 0.0
        self.on = False
        gc.callbacks.append(self._seen)

    def _seen(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        elif self.on:
            self.pauses.append((info["generation"], time.perf_counter() - self._started))

    def close(self) -> None:
        gc.callbacks.remove(self._seen)

    def summary(self) -> str:
        full = [d for g, d in self.pauses if g == 2]
        return (
            f"GC: {len(self.pauses)} collections, {1000 * sum(d for _, d in self.pauses):.0f} ms in all; "
            f"{len(full)} full, longest {1000 * max(full, default=0.0):.0f} ms"
        )


@dataclass
class Passes:
    """What a series of passes measured."""

    times: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # the pass thread's CPU time
    windows: list[tuple[float, float]] = field(default_factory=list)
    holds: list[float] = field(default_factory=list)
    phases: list[dict[str, float]] = field(default_factory=list)
    gc: GcPauses = field(default_factory=GcPauses)
    placed: int = 0
    sent: int = 0
    statements: str = ""

    def add(self, ctl: TimedController, fn: Callable[[], float]) -> None:
        ctl.reset()
        started = time.perf_counter()
        self.gc.on = True
        try:
            self.times.append(fn())
        finally:
            self.gc.on = False
        self.windows.append((started, time.perf_counter()))
        self.cpu.append(ctl.pass_cpu)
        self.holds += ctl.holds
        self.phases.append(dict(ctl.phase))


def _assigned(db: Database) -> int:
    with db.session() as s:
        return (
            s.scalar(
                select(func.count())
                .select_from(models.Allocation)
                .where(models.Allocation.state == AllocationState.ASSIGNED)
            )
            or 0
        )


def measure_large(
    kind: str, args: argparse.Namespace, sizes: list[int], work: Path, probes: list[list[Probe]]
) -> Passes:
    out = Passes()
    for i in range(args.repeat):
        with cluster(kind, args, sizes, work, pending=args.trials, running=0) as (c, api):
            ps = probes_for(c.ctl, api)
            statements = StatementCounter(c.db.engine)
            with Prober(ps, args.probe_interval):
                statements.enable()
                out.add(
                    c.ctl,
                    lambda first=i == 0: _profiled(
                        args if first else argparse.Namespace(profile=False),
                        c.ctl.timed_tick,
                        f"{kind}: the large pass",
                    ),
                )
                statements.enable(False)
            probes.append(ps)
            out.placed, out.sent, out.statements = _assigned(c.db), c.loop.sent, statements.summary()
    out.gc.close()
    return out


def measure_one_new(
    kind: str, args: argparse.Namespace, work: Path, *, running: int, probes: list[list[Probe]]
) -> Passes:
    """args.repeat_small passes, each after one new trial arrived; a first pass before them."""
    out = Passes()
    with cluster(kind, args, [1], work, pending=0, running=running) as (c, api):
        c.ctl.pass_thread = threading.get_ident()
        c.ctl.tick()  # a first pass, as a running master has made
        ps = probes_for(c.ctl, api)
        statements = StatementCounter(c.db.engine)
        with Prober(ps, args.probe_interval):
            for i in range(args.repeat_small):
                add_trial(c)
                c.heartbeat()
                statements.enable()
                out.add(
                    c.ctl,
                    lambda first=i == 0: _profiled(
                        args if first else argparse.Namespace(profile=False),
                        c.ctl.timed_tick,
                        f"{kind}: one new trial, {running:,} running",
                    ),
                )
                statements.enable(False)
                time.sleep(args.probe_interval)
        probes.append(ps)
        out.placed, out.sent = _assigned(c.db), c.loop.sent
        out.statements = statements.summary()
    out.gc.close()
    return out


def _wait_figures(
    db_name: str, what: str, probes: list[list[Probe]], windows: list[tuple[float, float]]
) -> list[Figure]:
    out = []
    for j in range(len(probes[0])):
        during = [d for ps in probes for d in ps[j].during(windows)]
        alone = [d for ps in probes for d in ps[j].outside(windows)]
        errors = Counter()
        for ps in probes:
            errors.update(ps[j].errors)
        name = probes[0][j].name
        if not during:
            out.append(Figure(NAME, f"{db_name}, {what}: {name}", 0.0, "ms", "no request overlapped a pass"))
            continue
        detail = (
            f"max of {len(during)} requests overlapping the passes; p50 {1000 * median(during):.1f} ms, "
            f"p90 {1000 * percentile(during, 90):.1f} ms; alone p50 {1000 * median(alone or [0.0]):.1f} ms"
        )
        if errors:
            detail += "; errors: " + "; ".join(f"{n}× {e}" for e, n in errors.items())
        out.append(Figure(NAME, f"{db_name}, {what}: {name} takes", 1000 * max(during), "ms", detail))
    return out


def measure_controller(kind: str, args: argparse.Namespace, sizes: list[int]) -> list[Figure]:
    db_name = "SQLite" if kind == "sqlite" else "PostgreSQL"
    figures: list[Figure] = []
    with work_dir(f"sched-{kind}", args.keep) as work:
        if "large" in args.shapes:
            probes: list[list[Probe]] = []
            big = measure_large(kind, args, sizes, work, probes)
            total = median(big.times)
            phase = {p: median([ph[p] for ph in big.phases]) for p in TimedController.PHASES}
            shape = f"{args.agents:,} agents×{args.slots}, {args.trials:,} pending in {args.experiments} experiments"
            figures += [
                Figure(
                    NAME,
                    f"{db_name}: the large pass, controller.tick(), trials of {label(sizes)} slot(s)",
                    1000 * total,
                    "ms",
                    f"median of {args.repeat} (fresh database each; min {1000 * min(big.times):.0f}, max "
                    f"{1000 * max(big.times):.0f}); {shape}; {big.placed:,} placed, {big.sent:,} start_task sent; "
                    f"the pass thread's CPU {1000 * median(big.cpu):.0f} ms; {big.gc.summary()}",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … of which check_agents / top_up (under the lock)",
                    1000 * (phase["check_agents"] + phase["top_up"]),
                    "ms",
                    f"{1000 * phase['check_agents']:.1f} / {1000 * phase['top_up']:.1f} ms",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … of which planning (outside the lock)",
                    1000 * phase["plan"],
                    "ms",
                    "the snapshot read in one read-only transaction and the pure decision",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … of which preparing the batches (outside the lock)",
                    1000 * phase["prepare"],
                    "ms",
                    "1,000 placements at a time: task spec rows, tokens, specs, StartTask",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … of which writing the batches (under the lock)",
                    1000 * phase["apply"],
                    "ms",
                    "one UPDATE ... RETURNING and one INSERT of events a batch (commits excluded)",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … the rest (commits, sending, wait reasons)",
                    1000 * (total - sum(phase.values())),
                    "ms",
                    "",
                ),
                Figure(
                    NAME,
                    f"{db_name}: the large pass's longest transaction under the lock",
                    1000 * max(big.holds),
                    "ms",
                    f"{len(big.holds) // args.repeat} transactions a pass; p50 {1000 * median(big.holds):.1f} ms",
                ),
                Figure(
                    NAME,
                    f"{db_name}: … per placed trial",
                    1000 * total / max(big.placed, 1),
                    "ms",
                    f"SQL statements in the pass: {big.statements}",
                ),
            ]
            figures += _wait_figures(db_name, "during the large pass", probes, big.windows)
        for running, shape in ((0, "idle"), (args.agents * args.slots - args.repeat_small, "busy")):
            if shape not in args.shapes:
                continue
            probes = []
            small = measure_one_new(kind, args, work, running=running, probes=probes)
            what = f"one new trial, {args.agents:,} agents, {running:,} trials running"
            figures += [
                Figure(
                    NAME,
                    f"{db_name}: {what}",
                    1000 * median(small.times),
                    "ms",
                    f"median of {args.repeat_small} passes (p90 {1000 * percentile(small.times, 90):.1f}, "
                    f"max {1000 * max(small.times):.1f} ms), a trial each; {small.placed} placed; "
                    f"plan {1000 * median([p['plan'] for p in small.phases]):.1f} ms, check_agents "
                    f"{1000 * median([p['check_agents'] for p in small.phases]):.1f} ms; CPU "
                    f"{1000 * median(small.cpu):.1f} ms; {small.gc.summary()}; SQL statements in the passes: "
                    f"{small.statements}",
                ),
            ]
            figures += _wait_figures(db_name, f"during those passes ({shape})", probes, small.windows)
    return figures


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
    p = argparse.ArgumentParser(
        prog="python -m benchmarks.scheduling_pass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--agents", type=int, default=1000, help="agents (default 1000)")
    p.add_argument("--slots", type=int, default=8, help="slots per agent (default 8)")
    p.add_argument("--trials", type=int, default=10000, help="waiting trials of the large pass (default 10000)")
    p.add_argument("--experiments", type=int, default=100, help="experiments the trials belong to (default 100)")
    p.add_argument(
        "--trial-slots",
        nargs="+",
        default=["1", "1,2,4,8,16", "0"],
        help="scenarios for the pure function: comma lists of slots_per_trial, cycled over the "
        "trials; the first is also the large pass's (default: 1  1,2,4,8,16  0)",
    )
    p.add_argument("--repeat-pure", type=int, default=5, help="runs of the pure function (default 5)")
    p.add_argument("--repeat", type=int, default=3, help="large passes, each on a fresh database (default 3)")
    p.add_argument(
        "--repeat-small",
        type=int,
        default=20,
        help="one-new-trial passes per shape (default 20); the busy shape leaves that many slots free",
    )
    p.add_argument(
        "--shapes",
        nargs="*",
        choices=["large", "idle", "busy"],
        default=["large", "idle", "busy"],
        help="controller passes to time: the large pass, one new trial on idle agents, one new trial "
        "on busy agents (default: all)",
    )
    p.add_argument(
        "--db",
        nargs="*",
        choices=["sqlite", "postgres"],
        default=["sqlite", "postgres"],
        help="databases for the controller passes; none to time only the pure function",
    )
    p.add_argument(
        "--probe-interval",
        type=float,
        default=0.02,
        help="seconds between one probe's requests during the passes (default 0.02)",
    )
    p.add_argument(
        "--master-runtime",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="set the interpreter before the passes as the master does once started "
        "(server.tune_runtime: the heap frozen, so full collections scan only what came since, "
        "a young collection every 50,000 allocations, a GIL switch interval of 1 ms; default "
        "on, --no-master-runtime for Python's defaults)",
    )
    p.add_argument(
        "--switch-interval",
        type=float,
        default=0.0,
        help="the GIL switch interval instead (seconds a running thread keeps the GIL while "
        "another waits; Python's default 0.005)",
    )
    p.add_argument(
        "--gc-threshold",
        type=int,
        default=0,
        help="the garbage collector's first threshold instead (allocations between young "
        "collections; Python's default 700)",
    )
    p.add_argument(
        "--profile", action="store_true", help="print a pyinstrument profile of the first pass of each shape"
    )
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()
