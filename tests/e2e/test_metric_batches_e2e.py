"""Metric batches end to end: a trial reports 10,000 steps as fast as it can through pedl.core while the
master is SIGKILLed and started again, or while its PostgreSQL restarts; its reports wait, retry
and are stored exactly once each, in batches."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import sqlite3
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg.conninfo import make_conninfo

from pedl.common.ports import free_port
from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS, Cluster

pytestmark = pytest.mark.e2e

STEPS = 10_000
FAULT_AT = 2_000  # the fault comes once this many steps are stored, with thousands still queued
# the agent keeps its task while the master is away for up to this long (a restart takes seconds,
# more on a busy machine: FAST_AGENTS' 8 s is too short for that)
MASTER_CONFIG = {"agent_reconnect_wait": "30s"}
PG_BIN_ROOT = Path("/usr/lib/postgresql")
# the statements a batch waits in when the test holds what they need (metrics/batches.py):
# the batch's own insert, in its transaction; the experiment's progress nudge, once it committed
BATCH_INSERT, PROGRESS_NUDGE = "COPY metrics", "UPDATE experiments SET progress"  # the batch's rows on PostgreSQL


def fast_reports_config() -> dict:
    # no restarts: a restarted trial would report every step again and hide a lost report
    return {
        "name": "fast-reports",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"steps": STEPS},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": STEPS}},
        "resources": {"slots_per_trial": 1},
    }


def stored_up_to(c: Cluster, exp_id: int) -> int:
    """The largest step the master has stored a training report for (batches are stored in order)."""
    trials = c.trials(exp_id)
    return trials[0]["totalBatchesProcessed"] if trials else 0


def start_reporting(c: Cluster) -> tuple[int, int]:
    """-> (experiment id, trial id) once FAULT_AT steps are stored."""
    exp_id = c.create(fast_reports_config(), model_dir=MODELS / "fast_reports")
    wait_for(lambda: stored_up_to(c, exp_id) >= FAULT_AT, 120, interval=0.05, what=f"{FAULT_AT} steps stored")
    return exp_id, c.trials(exp_id)[0]["id"]


def check_every_step_stored_once(c: Cluster, exp_id: int, trial_id: int) -> None:
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=180)
    log_tail = c.master.log_text()[-3000:]
    assert exp["state"] == "STATE_COMPLETED", f"experiment ended {exp['state']}:\n{log_tail}"
    assert c.trials(exp_id)[0]["restarts"] == 0
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    steps = [m["stepsCompleted"] for m in metrics]
    if steps != list(range(1, STEPS + 1)):
        counts = Counter(steps)
        missing = sorted(set(range(1, STEPS + 1)) - counts.keys())
        doubled = sorted(s for s, n in counts.items() if n > 1)
        pytest.fail(
            f"{len(steps)} training reports stored for {STEPS} steps: {len(missing)} missing "
            f"(first {missing[:10]}), {len(doubled)} doubled (first {doubled[:10]})\n{log_tail}"
        )
    assert all(m["metrics"]["loss"] == 1.0 / m["stepsCompleted"] for m in metrics)


def report_requests(c: Cluster) -> tuple[float, float]:
    """(training reports this master process stored, metric report requests it answered)."""
    reports = requests = 0.0
    for family in text_string_to_metric_families(c.master.api("GET", "/metrics")):
        for s in family.samples:
            if s.name == "pedl_metric_reports_total" and s.labels.get("group") == "training":
                reports += s.value
            if (
                s.name == "pedl_api_request_duration_seconds_count"
                and s.labels.get("method") == "POST"
                and s.labels.get("route")
                in ("/api/v1/trials/{trial_id}/metrics", "/api/v1/trials/{trial_id}/metrics/batch")
            ):
                requests += s.value
    return reports, requests


def conninfo(db: dict) -> str:
    return make_conninfo(
        host=db["host"], port=db["port"], user=db["user"], password=db["password"], dbname=db["name"], connect_timeout=3
    )


@contextlib.contextmanager
def batch_waiting(db: dict, lock_sql: str, statement: str) -> Iterator[None]:
    """Holds what `lock_sql` locks, in a transaction of the test's own, until the master's batch
    waits for it in `statement`: a fault then lands at that point of the batch. Released on exit."""
    holder = psycopg.connect(conninfo(db))
    try:
        holder.execute(lock_sql)
        with psycopg.connect(conninfo(db), autocommit=True) as watcher:
            waiting = (
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE %s"
            )
            wait_for(
                lambda: watcher.execute(waiting, (f"{statement}%",)).fetchone()[0],
                60,
                interval=0.05,
                what=f"a batch to wait for the test's lock in {statement!r}",
            )
        yield
    finally:
        with contextlib.suppress(psycopg.Error):  # a restarted server has ended the transaction already
            holder.rollback()
        holder.close()


@contextlib.contextmanager
def sqlite_write_lock(path: Path) -> Iterator[sqlite3.Connection]:
    """Holds the SQLite database's write lock, so that the master's next batch waits for it, in the
    middle of the stream: the trial reports faster than a poll can catch it otherwise."""
    holder = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        holder.execute("BEGIN IMMEDIATE")
        time.sleep(0.5)  # the sender's next batch reaches the lock and waits
        yield holder
    finally:
        holder.rollback()
        holder.close()


@pytest.mark.parametrize("e2e_db", ["sqlite", "postgres"], indirect=True)
def test_reports_survive_a_master_sigkill_once_each(e2e_db, make_cluster) -> None:
    c = make_cluster(MASTER_CONFIG, db=e2e_db)
    c.add_agent("a1")
    exp_id, trial_id = start_reporting(c)
    # on PostgreSQL the kill lands after a batch committed and before its answer, so the batch is
    # sent again and must replace, not double; on SQLite while a batch waits for the write lock
    if e2e_db:
        with batch_waiting(e2e_db, f"SELECT 1 FROM experiments WHERE id = {exp_id} FOR UPDATE", PROGRESS_NUDGE):
            before = stored_up_to(c, exp_id)
            c.master.kill()
    else:
        with sqlite_write_lock(c.master.data_dir / "pedl.db") as holder:  # the API would wait on it too
            before = holder.execute(
                "SELECT max(steps_completed) FROM metrics WHERE trial_id = ? AND metric_group = 'training'", (trial_id,)
            ).fetchone()[0]
            c.master.kill()
    c.master.start()
    assert FAULT_AT <= before < STEPS, f"the master was killed after step {before}, not mid-stream"
    check_every_step_stored_once(c, exp_id, trial_id)
    # the restarted master got the rest in batches: a few requests, not thousands
    reports, requests = report_requests(c)
    assert 0 < requests <= reports / 50, f"{reports:.0f} reports in {requests:.0f} requests"
    if e2e_db:  # and the batch that had committed before the kill, sent again, replaced itself
        assert reports > STEPS - before, f"{reports:.0f} reports after the restart, {before} before it"


class PrivatePostgres:
    """A PostgreSQL server of the test's own on a free port, so restarting it disturbs no other test
    (the suite shares the machine's). Its data lives in a directory of /tmp: initdb refuses to run as
    root, so under root it runs as the postgres user, who cannot enter pytest's root-only tmp_path."""

    def __init__(self) -> None:
        pg_ctls = sorted(PG_BIN_ROOT.glob("*/bin/pg_ctl"), key=lambda p: int(p.parent.parent.name.split(".")[0]))
        if not pg_ctls:
            pytest.skip(f"no PostgreSQL server binaries under {PG_BIN_ROOT}")
        self.bin = pg_ctls[-1].parent
        self.as_user: list[str] = []
        owner = None
        if os.geteuid() == 0:
            try:
                owner = pwd.getpwnam("postgres")
            except KeyError:
                pytest.skip("running as root and there is no postgres user to run initdb as")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.dir = Path(tempfile.mkdtemp(prefix="pedl-private-pg-"))
        if owner is not None:
            os.chown(self.dir, owner.pw_uid, owner.pw_gid)
        self.port = free_port()
        self.db = {
            "host": "127.0.0.1",
            "port": self.port,
            "user": "postgres",
            "password": "",
            "name": "postgres",
            "ssl_mode": "disable",
        }

    def _run(self, tool: str, *args: str) -> None:
        result = subprocess.run(
            [*self.as_user, str(self.bin / tool), *args], capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, f"{tool} {' '.join(args)} failed: {result.stdout}{result.stderr}"

    def pg_ctl(self, *args: str) -> None:
        self._run("pg_ctl", "-D", str(self.dir / "data"), "-l", str(self.dir / "server.log"), "-w", *args)

    def start(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.dir / "data"),
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        )
        # no fsync: the test restarts the server, it never crashes the machine
        self.pg_ctl("start", "-o", f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1 -c fsync=off")

    def stop(self) -> None:
        with contextlib.suppress(AssertionError, subprocess.TimeoutExpired):
            self.pg_ctl("stop", "-m", "immediate")
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    """Name it before `make_cluster`, so the master stops before its server does."""
    pg = PrivatePostgres()
    try:
        pg.start()
        yield pg
    finally:
        pg.stop()


def test_reports_survive_a_postgres_restart_once_each(private_postgres: PrivatePostgres, make_cluster) -> None:
    c = make_cluster(MASTER_CONFIG, db=private_postgres.db)
    c.add_agent("a1")
    exp_id, trial_id = start_reporting(c)
    # the restart ends the batch in the middle of its transaction (and the test's lock with it)
    with batch_waiting(private_postgres.db, "LOCK TABLE metrics IN SHARE MODE", BATCH_INSERT):
        private_postgres.pg_ctl("restart", "-m", "fast")
    assert stored_up_to(c, exp_id) < STEPS
    check_every_step_stored_once(c, exp_id, trial_id)
    assert c.master.alive(), c.master.log_text()[-3000:]
    # the batch the restart broke was answered 503, and pedl.core sent it again
    assert f"database unavailable on POST /api/v1/trials/{trial_id}/metrics/batch" in c.master.log_text()
