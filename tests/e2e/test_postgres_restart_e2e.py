"""PostgreSQL restarted under load: a real `pg_ctlcluster ... restart` while a trial reports a metric
every step. The master reconnects, loses no report it had accepted (reports refused during the outage
are retried by the library), stays alive, and the experiment completes."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import psycopg
import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config
from tests.support.databases import fresh_postgres_db, pg_admin_dsn, postgres_error

# it restarts the PostgreSQL server every other test uses, so it runs alone (`make test` runs the
# `serial` tests after the parallel ones)
pytestmark = [pytest.mark.e2e, pytest.mark.serial]

PG_CONF_DIR = Path("/etc/postgresql")
STEPS = 150


def _pg_version() -> str | None:
    versions = (
        sorted((p.name for p in PG_CONF_DIR.iterdir() if (p / "main").is_dir()), key=_version_key)
        if PG_CONF_DIR.is_dir()
        else []
    )
    return versions[-1] if versions else None


def _version_key(name: str) -> tuple:
    return tuple(int(part) if part.isdigit() else 0 for part in name.split("."))


def _require_restartable_postgres() -> str:
    if shutil.which("pg_ctlcluster") is None:
        pytest.skip("pg_ctlcluster is not installed: cannot restart PostgreSQL for real")
    version = _pg_version()
    if version is None:
        pytest.skip(f"no PostgreSQL cluster named 'main' under {PG_CONF_DIR}")
    error = postgres_error()
    if error:
        pytest.skip(error)
    return version


def _accepts_connections() -> bool:
    with psycopg.connect(pg_admin_dsn(), autocommit=True) as conn:
        conn.execute("select 1")
    return True


def test_postgres_restarted_under_load_loses_no_accepted_report(tmp_path: Path) -> None:
    version = _require_restartable_postgres()
    with fresh_postgres_db() as db:
        c = Cluster(tmp_path, db).start()
        try:
            c.add_agent("a1")
            exp_id = c.create(steps_config(steps=STEPS, delay=0.05, ckpt_every=25))

            def running_at(step: int) -> dict | None:
                trials = c.trials(exp_id)
                if trials and trials[0]["state"] == "STATE_RUNNING" and f"step {step} " in c.logs(trials[0]["id"]):
                    return trials[0]
                return None

            trial = wait_for(lambda: running_at(20), 90, what="the trial at step 20")
            started = time.monotonic()
            result = subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart", "-m", "fast"],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert result.returncode == 0, f"pg_ctlcluster restart failed: {result.stdout}{result.stderr}"
            wait_for(_accepts_connections, 60, interval=0.2, what="PostgreSQL to accept connections again")
            restart_s = time.monotonic() - started

            exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=180)
            log_tail = c.master.log_text()[-4000:]
            assert c.master.alive(), f"the master died after the PostgreSQL restart:\n{log_tail}"
            assert exp["state"] == "STATE_COMPLETED", f"experiment ended {exp['state']}:\n{log_tail}"
            metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
            steps = [m["stepsCompleted"] for m in metrics]
            missing = sorted(set(range(1, STEPS + 1)) - set(steps))
            assert steps == list(range(1, STEPS + 1)), (
                f"stored training steps are not 1..{STEPS} (restart took {restart_s:.1f}s); missing {missing}, "
                f"{len(steps)} rows\nmaster log tail:\n{log_tail}"
            )
            (after,) = c.trials(exp_id)
            assert after["restarts"] == 0, f"the trial restarted {after['restarts']} time(s):\n{log_tail}"
        finally:
            c.stop()
