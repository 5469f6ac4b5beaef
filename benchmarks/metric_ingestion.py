"""Metric ingestion: training-metric reports per second a real master stores, on SQLite and on
PostgreSQL, against what a plain executemany puts into the same `metrics` table of the same database."""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import yaml
from psycopg.types.json import Json

from benchmarks.harness import MODELS, Figure, add_common_args, run_main, work_dir
from pedl.cli.model_upload import pack_model_dir
from pedl.core.cluster_info import TrialInfo
from pedl.core.master_session import MasterSession
from pedl.core.train import MasterTrainContext
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_experiment, wait_for
from pedl.errors import PedlError

NAME = "metric_ingestion"
CLIENTS = {"batched": "reporters through pedl.core", "single": "clients of the single-report route"}
INSERT = ("INSERT INTO metrics (trial_id, trial_run_id, metric_group, steps_completed, report_time, metrics) "
          "VALUES ({p}, {p}, {p}, {p}, {p}, {p})")


def payload(metric_keys: int, step: int) -> dict[str, float]:
    """The avgMetrics of one report, the same shape the trial script sends."""
    return {"loss": 1.0 / step, **{f"metric_{k}": 0.5 + k for k in range(metric_keys - 1)}}


# -- the databases ---------------------------------------------------------------------------------


class Store:
    """The master's database seen from outside: count rows, and the raw-insert baselines."""

    def __init__(self, kind: str, connect: Callable[[], Any], placeholder: str) -> None:
        self.kind, self._connect, self._sql = kind, connect, INSERT.format(p=placeholder)

    def count(self, trial_id: int) -> int:
        con = self._connect()
        try:
            return con.execute("SELECT count(*) FROM metrics WHERE trial_id = %s".replace("%s", self._p),
                               (trial_id,)).fetchone()[0]
        finally:
            con.close()

    @property
    def _p(self) -> str:
        return "?" if self.kind == "sqlite" else "%s"

    def _rows(self, trial_id: int, run_id: int, first_step: int, n: int, metric_keys: int) -> list[tuple]:
        now = time.time()
        wrap = Json if self.kind == "postgres" else json.dumps
        return [(trial_id, run_id, "training", step, now, wrap(payload(metric_keys, step)))
                for step in range(first_step, first_step + n)]

    def executemany(self, trial_id: int, run_id: int, first_step: int, n: int, metric_keys: int) -> float:
        """Rows per second: n rows in one executemany, one commit (JSON encoding included)."""
        con = self._connect()
        try:
            started = time.perf_counter()
            rows = self._rows(trial_id, run_id, first_step, n, metric_keys)
            cur = con.cursor()
            cur.executemany(self._sql, rows)
            con.commit()
            return n / (time.perf_counter() - started)
        finally:
            con.close()

    def row_per_commit(self, trial_id: int, run_id: int, first_step: int, n: int, metric_keys: int) -> float:
        """Rows per second: one INSERT and one commit per row, one connection, as a report is stored."""
        con = self._connect()
        try:
            started = time.perf_counter()
            for row in self._rows(trial_id, run_id, first_step, n, metric_keys):
                con.execute(self._sql, row)
                con.commit()
            return n / (time.perf_counter() - started)
        finally:
            con.close()


def sqlite_store(path: Path) -> Store:
    def connect() -> sqlite3.Connection:
        con = sqlite3.connect(path, timeout=30)
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=NORMAL")  # the master's settings (db/engine.py)
        return con

    return Store("sqlite", connect, "?")


def postgres_store(db: dict) -> Store:
    # keyword arguments, not a DSN string: libpq reads "password= dbname=x" as the password "dbname=x"
    params = {"host": db["host"], "port": db["port"], "user": db["user"], "dbname": db["name"],
              "password": db["password"] or None}
    return Store("postgres", lambda: psycopg.connect(**params), "%s")


@contextmanager
def database(kind: str, work: Path) -> Iterator[tuple[dict | None, Callable[[], Store]]]:
    """(master.yaml `db:` or None for SQLite, how to reach the same database from outside)."""
    if kind == "sqlite":
        yield None, lambda: sqlite_store(work / "master-data" / "pedl.db")
        return
    from tests.support.databases import fresh_postgres_db

    with fresh_postgres_db() as db:
        yield db, lambda: postgres_store(db)


def cpu_seconds(pid: int) -> float | None:
    """user + system CPU seconds of a process (all its threads) so far; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the concurrent clients ------------------------------------------------------------------------


def _reporter(url: str, token: str, info: TrialInfo, steps: range, metric_keys: int, go: Any, failed: Any) -> None:
    """One trial's training loop: a report per step through pedl.core, then wait for the master."""
    session = MasterSession(url, token)
    train = MasterTrainContext(session, info)
    values = payload(metric_keys, 1)
    go.wait()
    try:
        for step in steps:
            train.report_training_metrics(steps_completed=step, metrics=values)
        session.flush()
    except PedlError:
        with failed.get_lock():
            failed.value += 1
    finally:
        session.close()


def report_concurrently(url: str, token: str, trial_id: int, run_id: int, threads: int, per_thread: int,
                        first_step: int, metric_keys: int) -> tuple[int, int, float]:
    """(reported, failed, seconds): `threads` reporter processes, each as a trial's training loop
    reports through pedl.core (a background sender that batches what queues up), as fast as it
    can; the time runs until every reporter's reports are acknowledged."""
    ctx = multiprocessing.get_context("fork")
    go, failed = ctx.Event(), ctx.Value("i", 0)
    info = TrialInfo(trial_id=trial_id, experiment_id=0, trial_seed=0, hparams={}, config={}, steps_completed=0,
                     trial_run_id=run_id)
    workers = [ctx.Process(target=_reporter, args=(url, token, info, range(first_step + t * per_thread,
                                                                          first_step + (t + 1) * per_thread),
                                                   metric_keys, go, failed)) for t in range(threads)]
    for w in workers:
        w.start()
    time.sleep(0.5)  # every reporter imported and waiting
    started = time.perf_counter()
    go.set()
    for w in workers:
        w.join()
    return threads * per_thread, failed.value, time.perf_counter() - started


def post_concurrently(url: str, token: str, trial_id: int, run_id: int, threads: int, per_thread: int,
                      first_step: int, metric_keys: int) -> tuple[int, int, float]:
    """(acknowledged, failed, seconds): `threads` clients of Determined's single-report route, each
    with its own keep-alive connection, one report per request."""
    barrier = threading.Barrier(threads + 1)
    acked = [0] * threads
    failed = [0] * threads

    def client(t: int) -> None:
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=60) as http:
            bodies = []
            for j in range(per_thread):
                step = first_step + t * per_thread + j
                bodies.append(json.dumps({"metrics": {
                    "trialId": trial_id, "trialRunId": run_id, "stepsCompleted": step,
                    "metrics": {"avgMetrics": payload(metric_keys, step), "batchMetrics": []}},
                    "group": "training"}))
            barrier.wait()
            for body in bodies:
                r = http.post(f"/api/v1/trials/{trial_id}/metrics", content=body,
                              headers={"Content-Type": "application/json"})
                if r.status_code == 200:
                    acked[t] += 1
                else:
                    failed[t] += 1

    workers = [threading.Thread(target=client, args=(t,)) for t in range(threads)]
    for w in workers:
        w.start()
    barrier.wait()
    started = time.perf_counter()
    for w in workers:
        w.join()
    return sum(acked), sum(failed), time.perf_counter() - started


# -- one database ----------------------------------------------------------------------------------


def measure_one(kind: str, args: argparse.Namespace) -> list[Figure]:
    files = pack_model_dir(MODELS / "reporter")
    with work_dir(f"metrics-{kind}", args.keep) as work, database(kind, work) as (db, store_of):
        out = work / "handoff"
        out.mkdir()
        cfg: dict[str, Any] = {"checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}}
        if db:
            cfg["db"] = db
        master = Master(work, cfg).start()
        agent = LocalAgent(work, master.url, "agent-0", token=master.agent_token).start()
        try:
            wait_for(lambda: agent_connected(master, "agent-0"), 60, what="the agent to connect")
            config = {"name": "metric-ingestion", "entrypoint": "python3 train.py", "max_restarts": 0,
                      "hyperparameters": {"reports": args.serial_reports, "metric_keys": args.metric_keys,
                                          "out_dir": str(out), "wait_s": 600},
                      "searcher": {"name": "single", "metric": "loss", "max_length": {"batches": 1}},
                      "resources": {"slots_per_trial": 1}}
            exp_id = master.api("POST", "/api/v1/experiments", {"config": yaml.safe_dump(config),
                                                                "modelDefinition": files})["experiment"]["id"]
            handoff_path = out / "handoff.json"
            wait_for(handoff_path.exists, 600, interval=0.1, what="the trial's serial reports")
            handoff = json.loads(handoff_path.read_text())
            trial_id, run_id = handoff["trial_id"], handoff["trial_run_id"]
            serial_rate = handoff["reports"] / handoff["seconds"]
            master_cpu = cpu_seconds(master.pid)
            send = report_concurrently if args.mode == "batched" else post_concurrently
            acked, failed, seconds = send(
                master.url, handoff["token"], trial_id, run_id, args.threads, args.reports_per_thread,
                first_step=handoff["reports"] + 1, metric_keys=args.metric_keys)
            if master_cpu is not None:
                master_cpu = cpu_seconds(master.pid) - master_cpu
            (out / "release").touch()
            wait_experiment(master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=120)
        finally:
            agent.stop()
            master.stop()
        store = store_of()
        stored = store.count(trial_id)
        expected = handoff["reports"] + acked
        concurrent_rate = acked / seconds
        next_step = expected + 1_000_000
        raw_many = store.executemany(trial_id, run_id, next_step, args.raw_rows, args.metric_keys)
        raw_each = store.row_per_commit(trial_id, run_id, next_step + args.raw_rows, args.raw_rows_committed,
                                        args.metric_keys)
        after = store.count(trial_id)
    if after != stored + args.raw_rows + args.raw_rows_committed:
        expected = stored + args.raw_rows + args.raw_rows_committed
        print(f"warning: {kind}: the raw inserts left {after} rows, expected {expected}")
    db_name = "SQLite" if kind == "sqlite" else "PostgreSQL"
    return [
        Figure(NAME, f"{db_name}: trial script, serial reports/s", serial_rate, "reports/s",
               f"{handoff['reports']} reports through pedl.core, one in flight"),
        Figure(NAME, f"{db_name}: {args.threads} concurrent {CLIENTS[args.mode]}, reports/s", concurrent_rate,
               "reports/s", f"{acked} reported, {failed} failed, in {seconds:.1f}s"),
        *([Figure(NAME, f"{db_name}: master CPU per report", 1000 * master_cpu / max(acked, 1), "ms",
                  f"master process busy {100 * master_cpu / seconds:.0f}% of one core during the concurrent run")]
          if master_cpu is not None else []),
        Figure(NAME, f"{db_name}: rows stored / reports acknowledged", stored, "rows",
               f"expected {expected}" + (" (match)" if stored == expected else " (MISMATCH)")),
        Figure(NAME, f"{db_name}: raw executemany rows/s", raw_many, "rows/s",
               f"{args.raw_rows} rows, one transaction"),
        Figure(NAME, f"{db_name}: raw insert+commit per row, rows/s", raw_each, "rows/s",
               f"{args.raw_rows_committed} rows, one connection"),
        Figure(NAME, f"{db_name}: master ÷ raw executemany", concurrent_rate / raw_many, "ratio",
               "concurrent reports/s ÷ executemany rows/s"),
        Figure(NAME, f"{db_name}: master ÷ raw commit per row", concurrent_rate / raw_each, "ratio",
               "concurrent reports/s ÷ insert+commit rows/s"),
    ]


def measure(args: argparse.Namespace) -> list[Figure]:
    figures: list[Figure] = []
    for kind in args.db:
        if kind == "postgres":
            from tests.support.databases import postgres_error

            problem = postgres_error()
            if problem:
                print(f"skipping PostgreSQL: {problem}")
                continue
        figures += measure_one(kind, args)
    return figures


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m benchmarks.metric_ingestion", description=__doc__)
    p.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    p.add_argument("--serial-reports", type=int, default=1000, help="reports the trial script makes (default 1000)")
    p.add_argument("--mode", choices=list(CLIENTS), default="batched",
                   help="batched: reporters through pedl.core, whose sender batches (default); single: "
                        "Determined's one-report-per-request route")
    p.add_argument("--threads", type=int, default=8, help="concurrent reporters (default 8)")
    p.add_argument("--reports-per-thread", type=int, default=5000,
                   help="reports each reporter makes (default 5000; 300 fits --mode single)")
    p.add_argument("--metric-keys", type=int, default=8, help="metrics per report (default 8)")
    p.add_argument("--raw-rows", type=int, default=20000, help="rows in the raw executemany (default 20000)")
    p.add_argument("--raw-rows-committed", type=int, default=2000,
                   help="rows in the raw commit-per-row baseline (default 2000)")
    add_common_args(p)
    return p


def main(argv: list[str] | None = None) -> list[Figure]:
    return run_main(parser(), measure, argv)


if __name__ == "__main__":
    main()
