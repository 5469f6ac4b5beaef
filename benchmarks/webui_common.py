"""What the WebUI benchmarks share: a real master whose database is seeded directly (experiments and
trials through the ORM models, metric reports in bulk), and Debian's chromium driven by Playwright,
logged in, timing a navigation inside the page until a DOM condition holds."""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import random
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml
from sqlalchemy import Engine, inspect, select, text
from sqlalchemy.orm import Session, sessionmaker

from benchmarks.harness import Figure, percentile
from pedl.config.experiment_config import parse_experiment_config
from pedl.config.master_config import MasterConfig, load_master_config
from pedl.devcluster import Master, wait_for
from pedl.master.db import models
from pedl.master.db.engine import make_engine
from pedl.master.experiments.labels import joined as joined_labels
from pedl.master.experiments.service import effective_config
from pedl.master.lifecycle.states import ExperimentState, TrialState

CHROMIUM = "/usr/bin/chromium"  # Debian's; never a browser download
VIEWPORT = {"width": 1400, "height": 900}
USER = "determined"  # the default user, blank password
METRICS_COLUMNS = ("trial_id", "trial_run_id", "metric_group", "steps_completed", "report_time", "metrics")


# -- the master and its database ------------------------------------------------------------------


@contextmanager
def database(kind: str) -> Iterator[dict | None]:
    """master.yaml's `db:` (None: the SQLite default), a fresh PostgreSQL database dropped afterwards."""
    if kind == "sqlite":
        yield None
        return
    from tests.support.databases import fresh_postgres_db

    with fresh_postgres_db() as db:
        yield db


def on_each_database(kinds: Iterable[str], measure_one: Callable[[str], list[Figure]]) -> list[Figure]:
    """measure_one(kind) for each of `kinds` (sqlite, postgres); PostgreSQL skipped, saying why, when
    it does not answer."""
    figures: list[Figure] = []
    for kind in kinds:
        if kind == "postgres":
            from tests.support.databases import postgres_error

            problem = postgres_error()
            if problem:
                print(f"skipping PostgreSQL: {problem}")
                continue
        figures += measure_one(kind)
    return figures


def db_name(kind: str) -> str:
    return "SQLite" if kind == "sqlite" else "PostgreSQL"


def migrated_master(work: Path, db: dict | None, users: Sequence[str] = ()) -> Master:
    """A master started once (its migrations ran, its default users and `users` exist) and stopped
    again, so that its database can be seeded with nothing else writing to it."""
    cfg: dict[str, Any] = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}}
    if db:
        cfg["db"] = db
    master = Master(work, cfg).start()
    try:
        create_users(master, list(users))
    finally:
        master.stop()
    return master


def master_config(master: Master) -> MasterConfig:
    return load_master_config(master.config_path)


def sessions(master: Master) -> tuple[Engine, sessionmaker[Session]]:
    engine = make_engine(master_config(master).database_url())
    return engine, sessionmaker(engine, expire_on_commit=False)


def create_users(master: Master, names: list[str]) -> None:
    """Users made by admin through the API (the master must be running)."""
    r = httpx.post(f"{master.url}/api/v1/auth/login", json={"username": "admin", "password": "", "isHashed": False})
    r.raise_for_status()
    headers = {"Authorization": f"Bearer {r.json()['token']}"}
    for name in names:
        body = {"user": {"username": name, "admin": False, "active": True}, "password": "", "isHashed": False}
        httpx.post(f"{master.url}/api/v1/users", json=body, headers=headers, timeout=30).raise_for_status()


# -- seeding --------------------------------------------------------------------------------------


@dataclass
class ExperimentSpec:
    name: str
    state: ExperimentState
    owner: str = USER
    labels: list[str] = field(default_factory=list)
    metric: str = "validation_loss"


def experiment_text(spec: ExperimentSpec, hparams: dict[str, Any]) -> str:
    return yaml.safe_dump(
        {
            "name": spec.name,
            "entrypoint": "python3 train.py",
            "labels": spec.labels,
            "hyperparameters": hparams,
            "searcher": {"name": "random", "metric": spec.metric, "max_trials": 200, "max_length": {"batches": 20000}},
        }
    )


HPARAMS = {
    "lr": {"type": "log", "minval": -5, "maxval": -1, "base": 10},
    "batch_size": {"type": "categorical", "vals": [32, 64, 128, 256]},
    "dropout": {"type": "double", "minval": 0.0, "maxval": 0.5},
}


def trial_hparams(rnd: random.Random) -> dict[str, Any]:
    return {
        "lr": 10 ** rnd.uniform(-5, -1),
        "batch_size": rnd.choice([32, 64, 128, 256]),
        "dropout": round(rnd.uniform(0, 0.5), 3),
    }


END_REASONS = {ExperimentState.CANCELED: "killed", ExperimentState.ERROR: "all trials failed"}


def add_experiments(
    s: Session, config: MasterConfig, specs: list[ExperimentSpec], start: float
) -> list[models.Experiment]:
    """Experiment rows as the API stores them (validated, fully defaulted config), ended in their state."""
    owners = {u.username: u.id for u in s.query(models.User)}
    texts: dict[tuple, tuple[dict, str]] = {}
    rows = []
    for i, spec in enumerate(specs):
        key = (spec.name, tuple(spec.labels), spec.metric)
        if key not in texts:
            text = experiment_text(spec, HPARAMS)
            texts[key] = (effective_config(config, parse_experiment_config(text, limits=config.limits)), text)
        full, text = texts[key]
        ended = spec.state in (ExperimentState.COMPLETED, ExperimentState.CANCELED, ExperimentState.ERROR)
        rows.append(
            models.Experiment(
                name=spec.name,
                description="",
                owner_id=owners[spec.owner],
                state=spec.state,
                config=full,
                original_config=text,
                searcher_state={"seed": i, "state": None},
                progress=1.0 if ended else 0.4,
                resource_pool=full["resources"]["resource_pool"],
                start_time=start + i,
                end_time=start + i + 3600 if ended else None,
                archived=False,
                project_id=1,
                labels=joined_labels(spec.labels),
                end_reason=END_REASONS.get(spec.state),
            )
        )
    s.add_all(rows)
    s.flush()
    return rows


TRIAL_STATE_OF = {
    ExperimentState.COMPLETED: TrialState.COMPLETED,
    ExperimentState.CANCELED: TrialState.CANCELED,
    ExperimentState.ERROR: TrialState.ERROR,
    ExperimentState.PAUSED: TrialState.PAUSED,
}


def add_trials(
    s: Session, counts: Iterable[tuple[models.Experiment, int]], rnd: random.Random, length: int
) -> list[models.Trial]:
    """(experiment, n): n ended trials of each, without reports (Summaries.apply fills those in), in
    one flush."""
    rows = []
    for exp, n in counts:
        for _ in range(n):
            rows.append(
                models.Trial(
                    experiment_id=exp.id,
                    request_id=uuid.uuid4().hex,
                    task_id=f"pending-{uuid.uuid4().hex}",
                    hparams=trial_hparams(rnd),
                    seed=rnd.randrange(2**31),
                    state=TRIAL_STATE_OF[exp.state],
                    restarts=0,
                    run_id=1,
                    start_time=exp.start_time,
                    end_time=exp.end_time,
                    total_batches=length,
                    best_metric=None,
                    summary_metrics={},
                    target_length=length,
                )
            )
    s.add_all(rows)
    s.flush()
    for t in rows:
        t.task_id = f"{t.experiment_id}.{t.id}"
    return rows


def curve(step: int, total: int, scale: float, rnd: random.Random) -> float:
    """A falling loss with noise and a rare spike, so that downsampling has real work."""
    value = scale * (0.2 + 2.0 * math.exp(-5.0 * step / total)) * (1.0 + rnd.gauss(0, 0.05))
    return value * 3 if rnd.random() < 0.001 else value


def metric_rows(
    trial_id: int, training: int, validation_every: int, seed: int, start: float
) -> Iterator[tuple[int, int, str, int, float, str]]:
    """A trial's reports in the order the trial makes them: training every step 1..`training`,
    validation every `validation_every` steps. JSON text is written directly (json.dumps per row is
    most of the seeding time otherwise)."""
    rnd = random.Random(seed)
    scale = rnd.uniform(0.5, 1.5)
    for step in range(1, training + 1):
        loss = curve(step, training, scale, rnd)
        yield (
            trial_id,
            1,
            "training",
            step,
            start + step * 0.05,
            f'{{"loss": {loss!r}, "accuracy": {1.0 / (1.0 + loss)!r}, "lr": {1e-3 * (1 - step / training)!r}}}',
        )
        if step % validation_every == 0:
            vloss = curve(step, training, scale * 1.1, rnd)
            yield (
                trial_id,
                1,
                "validation",
                step,
                start + step * 0.05,
                f'{{"validation_loss": {vloss!r}, "accuracy": {1.0 / (1.0 + vloss)!r}}}',
            )


class Summaries:
    """What metrics.record leaves on each trial (the latest report of each group, the best searcher
    metric), kept while the seeded rows stream past."""

    def __init__(self, metric: str, smaller_is_better: bool = True) -> None:
        self.metric, self.smaller = metric, smaller_is_better
        self.latest: dict[tuple[int, str], tuple] = {}
        self.best: dict[int, float] = {}

    def watch(self, rows: Iterable[tuple]) -> Iterator[tuple]:
        for row in rows:
            self.latest[(row[0], row[2])] = row
            if row[2] == "validation":
                value = json.loads(row[5]).get(self.metric)
                held = self.best.get(row[0])
                if value is not None and (held is None or (value < held if self.smaller else value > held)):
                    self.best[row[0]] = value
            yield row

    def apply(self, trials: Iterable[models.Trial]) -> None:
        for t in trials:
            summary = {}
            for group in ("training", "validation"):
                row = self.latest.get((t.id, group))
                if row:  # the rows come in step order: the last is the largest step reached
                    summary[f"latest_{group}"] = {
                        "steps_completed": row[3],
                        "metrics": json.loads(row[5]),
                        "max_steps_completed": row[3],
                    }
            t.summary_metrics = summary
            t.best_metric = self.best.get(t.id)


def bulk_insert_metrics(master: Master, rows: Iterable[tuple], batch: int = 50_000) -> int:
    """Rows into `metrics` in large batches: executemany on SQLite, COPY on PostgreSQL."""
    config = master_config(master)
    if config.db is None:
        con = sqlite3.connect(config.database_url().split("sqlite:///", 1)[1], timeout=30)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")
        sql = f"INSERT INTO metrics ({', '.join(METRICS_COLUMNS)}) VALUES (?, ?, ?, ?, ?, ?)"
        count = 0
        try:
            chunk: list[tuple] = []
            for row in rows:
                chunk.append(row)
                if len(chunk) >= batch:
                    con.executemany(sql, chunk)
                    con.commit()
                    count += len(chunk)
                    chunk = []
            con.executemany(sql, chunk)
            con.commit()
            return count + len(chunk)
        finally:
            con.close()
    db = config.db
    params = {"host": db.host, "port": db.port, "user": db.user, "dbname": db.name, "password": db.password or None}
    count = 0
    with psycopg.connect(**params) as con, con.cursor() as cur:
        with cur.copy(f"COPY metrics ({', '.join(METRICS_COLUMNS)}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
                count += 1
        con.commit()
        con.execute("ANALYZE metrics")  # what autovacuum does within a minute of such a load
    return count


def add_reports(
    master: Master,
    trial_ids: list[int],
    training: int,
    validation_every: int,
    metric: str,
    start: float,
    batch: int = 50_000,
) -> tuple[int, float]:
    """Each trial's reports in bulk (metric_rows), then its summary as metrics.record leaves it (the
    master's digester learns from the summaries what to digest). -> (rows, seconds the rows took)."""
    summaries = Summaries(metric)
    rows = itertools.chain.from_iterable(
        metric_rows(t, training, validation_every, seed=t, start=start) for t in trial_ids
    )
    started = time.perf_counter()
    count = bulk_insert_metrics(master, summaries.watch(rows), batch=batch)
    seconds = time.perf_counter() - started
    engine, make_session = sessions(master)
    try:
        with make_session() as s:
            summaries.apply(s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids))))
            s.commit()
    finally:
        engine.dispose()
    return count, seconds


def digests_reaching(master: Master, steps: dict[str, int]) -> int | None:
    """(trial, group) pairs whose metric digests reach the given step of their group; None where the
    master keeps no digests (before migration 0006). Read without taking SQLite's write lock."""
    engine = make_engine(master_config(master).database_url(), readonly=True)
    try:
        with engine.connect() as con:
            if not inspect(con).has_table("metric_digest_marks"):
                return None
            return sum(
                con.execute(
                    text("SELECT count(*) FROM metric_digest_marks WHERE metric_group = :g AND through_step >= :s"),
                    {"g": group, "s": step},
                ).scalar_one()
                for group, step in steps.items()
            )
    finally:
        engine.dispose()


def wait_for_digests(master: Master, steps: dict[str, int], trials: int, timeout_s: float) -> float | None:
    """Seconds until the master's background digester has folded every seeded report (each trial's
    groups reach `steps`), so that what is measured is the steady state, not the catching up. None
    where the master keeps no digests."""
    started = time.monotonic()
    if digests_reaching(master, steps) is None:
        return None
    wait_for(
        lambda: digests_reaching(master, steps) == trials * len(steps),
        timeout_s,
        interval=1.0,
        what=f"the metric digests of {trials} trials",
    )
    return time.monotonic() - started


# -- the browser ----------------------------------------------------------------------------------


@contextmanager
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def logged_in_context(browser: Any, base_url: str, init_script: str | None = None) -> Any:
    """A browser context holding the session cookies (POST /api/v1/auth/session, as the login page does)."""
    context = browser.new_context(viewport=VIEWPORT, base_url=base_url)
    context.set_default_timeout(60_000)
    r = context.request.post(f"{base_url}/api/v1/auth/session", data={"username": USER, "password": ""})
    if r.status != 200:
        raise RuntimeError(f"browser login failed: HTTP {r.status} {r.text()[:300]}")
    if init_script:
        context.add_init_script(init_script)
    return context


# what each page shows once loaded (docs/webui.md's DOM contract), as READY_SCRIPT predicates
LIST_ROWS = """(doc) => {
  const rows = doc.querySelectorAll('tr[data-experiment-id]');
  return rows.length ? { rows: rows.length } : null;
}"""

# the learning curves hold every trial with points (data-points is {"<trialId>": points drawn});
# %d: the trials to wait for
CURVES_DRAWN = """(doc) => {
  const el = doc.querySelector('[data-testid=learning-curves]');
  if (!el) return null;
  const drawn = Object.values(JSON.parse(el.getAttribute('data-points') || '{}')).filter((n) => n > 0);
  return drawn.length >= %d ? { trials: drawn.length, points: drawn.reduce((a, b) => a + b, 0) } : null;
}"""

AGENT_ROWS = """(doc) => {
  const rows = doc.querySelectorAll('tr[data-agent-id]');
  return rows.length ? { agents: rows.length } : null;
}"""

# `when(doc)` is a JS predicate returning a detail object (truthy) once the page shows what is waited
# for; the first time it holds, the time since navigation start is kept, and again two frames later
# (after the effects that draw, e.g. uPlot's canvas, have run and the frame is painted)
READY_SCRIPT = """(() => {
  const when = %s;
  const bench = (window.__bench = {});
  const check = () => {
    if (bench.readyAt !== undefined) return;
    let detail;
    try { detail = when(document); } catch (e) { detail = null; }
    if (!detail) return;
    bench.readyAt = performance.now();
    bench.detail = detail;
    requestAnimationFrame(() => setTimeout(() => requestAnimationFrame(() => {
      bench.paintedAt = performance.now();
    })));
  };
  new MutationObserver(check).observe(document, { subtree: true, childList: true, attributes: true });
})();"""


@dataclass
class Navigation:
    ready_ms: float  # in the page: navigation start to the condition holding
    painted_ms: float  # ... to two frames later
    wall_ms: float  # as the benchmark saw it: page.goto called to the condition seen
    body_bytes: int  # response bodies as transferred (encoded), until painted
    decoded_bytes: int  # the same bodies decoded (what was not cached)
    requests: int
    compressed: bool  # any response came with Content-Encoding
    api_ms: dict[str, float]  # each API request's time in the browser (request start to response end)
    api_bytes: dict[str, tuple[int, int]]  # ... and its body (as sent, decoded)
    detail: Any


def capture_console(page: Any) -> list[str]:
    lines: list[str] = []
    page.on("console", lambda m: lines.append(f"[{m.type}] {m.text}") if m.type in ("error", "warning") else None)
    page.on("pageerror", lambda e: lines.append(f"[pageerror] {e}"))
    page.on(
        "response", lambda r: lines.append(f"[http {r.status}] {r.request.method} {r.url}") if r.status >= 400 else None
    )
    # polls cut short by the next navigation fail with net::ERR_ABORTED, as they should
    page.on(
        "requestfailed",
        lambda r: (
            lines.append(f"[request failed] {r.method} {r.url}: {r.failure}")
            if "ERR_ABORTED" not in (r.failure or "")
            else None
        ),
    )
    return lines


def navigate(page: Any, url: str, timeout_s: float) -> Navigation:
    """page.goto(url) and wait for the READY_SCRIPT condition (the context must carry the script)."""
    responses: list[Any] = []

    def on_response(r: Any) -> None:
        responses.append(r)

    page.on("response", on_response)
    started = time.perf_counter()
    try:
        page.goto(url, wait_until="commit")
        page.wait_for_function(
            "() => window.__bench && window.__bench.readyAt !== undefined", timeout=timeout_s * 1000, polling=20
        )
        wall_ms = 1000 * (time.perf_counter() - started)
        page.wait_for_function("() => window.__bench.paintedAt !== undefined", timeout=timeout_s * 1000)
        bench = page.evaluate("() => window.__bench")
    finally:
        page.remove_listener("response", on_response)
    body = decoded = 0
    compressed = False
    api_ms: dict[str, float] = {}
    api_bytes: dict[str, tuple[int, int]] = {}
    for r in responses:
        sent = r.request.sizes()["responseBodySize"]  # 0 for what the browser had cached
        body += sent
        if r.headers.get("content-encoding"):
            compressed = True
        size = 0
        if sent and r.status == 200:
            with contextlib.suppress(Exception):  # a body the browser did not keep
                size = len(r.body())
        decoded += size
        if "/api/" in r.url:
            path = r.url.split("://", 1)[1].split("/", 1)[1]
            t = r.request.timing
            if t["responseEnd"] >= 0 and t["requestStart"] >= 0:
                api_ms[path] = t["responseEnd"] - t["requestStart"]
            api_bytes[path] = (sent, size)
    return Navigation(
        ready_ms=bench["readyAt"],
        painted_ms=bench["paintedAt"],
        wall_ms=wall_ms,
        body_bytes=body,
        decoded_bytes=decoded,
        requests=len(responses),
        compressed=compressed,
        api_ms=api_ms,
        api_bytes=api_bytes,
        detail=bench.get("detail"),
    )


def page_text(page: Any) -> str:
    try:
        return page.locator("body").inner_text(timeout=5000)[-2000:]
    except Exception as exc:  # a diagnostic only
        return f"(no page text: {exc})"


# -- the API alone --------------------------------------------------------------------------------


@dataclass
class ApiTiming:
    seconds: list[float]  # each GET, the first apart: the master may keep an answer it computed
    status: int
    body_bytes: int  # decoded
    sent_bytes: int  # as it came over the wire
    encoding: str  # Content-Encoding, "" for none

    @property
    def repeated_p50_ms(self) -> float:
        """p50 of the GETs after the first (of the first alone when there is one)."""
        return p50([1000 * t for t in (self.seconds[1:] or self.seconds)])


def time_api(master: Master, path: str, repeat: int) -> ApiTiming:
    """GETs of `path` with a bearer token and no If-None-Match (the full answer each time), accepting
    gzip as a browser does."""
    out = ApiTiming([], 0, 0, 0, "")
    with httpx.Client(base_url=master.url, headers={"Authorization": f"Bearer {master.token()}"}, timeout=600) as http:
        for _ in range(repeat):
            started = time.perf_counter()
            r = http.get(path, headers={"Accept-Encoding": "gzip, deflate, br"})
            r.read()
            out.seconds.append(time.perf_counter() - started)
            out.status, out.body_bytes, out.sent_bytes = r.status_code, len(r.content), r.num_bytes_downloaded
            out.encoding = r.headers.get("content-encoding", "")
    return out


def api_figure_detail(api: ApiTiming, first: str) -> str:
    """`first`: what came before the first GET (it may have computed what later ones are answered from)."""
    ms = [1000 * t for t in api.seconds]
    rest = f"; then {p50_max(ms[1:])}" if len(ms) > 1 else ""
    sent = f"{api.sent_bytes / 1e3:,.0f} kB as sent ({api.encoding})" if api.encoding else "not compressed"
    return (
        f"first {ms[0]:,.0f} ms ({first}){rest}; HTTP {api.status}, {api.body_bytes / 1e3:,.0f} kB body, {sent}; "
        f"no If-None-Match"
    )


def p50(values: list[float]) -> float:
    return percentile(values, 50)


def p50_max(values_ms: list[float]) -> str:
    return f"p50 {p50(values_ms):,.0f} ms, max {max(values_ms):,.0f} ms over {len(values_ms)}"
