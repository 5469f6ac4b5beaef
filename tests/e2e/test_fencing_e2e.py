"""Fencing end to end: an agent stopped (SIGSTOP) past the reconnect wait is declared lost and its
trial restarts on another agent. The old run, orphaned, must not count: the master refuses its
reports, and once its agent runs again (SIGCONT) the agent kills it before it even reconnects."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS, Cluster
from tests.support import task_processes

pytestmark = pytest.mark.e2e

QUIET_AT, TOTAL = 10, 40
RECONNECT_WAIT = 4


def _agent_state(c: Cluster, agent_id: str) -> str:
    return next(a["state"] for a in c.master.api("GET", "/api/v1/agents")["agents"] if a["id"] == agent_id)


def _log_lines(c: Cluster, trial_id: int) -> list[dict]:
    import json

    text = c.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    return [json.loads(line)["result"] for line in text.splitlines() if line]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _orphan_reports(progress: Path) -> list[tuple[int, int, str]]:
    if not progress.exists():
        return []
    return [
        (int(pid), int(step), status)
        for pid, step, status in (line.split() for line in progress.read_text().splitlines() if line.count(" ") == 2)
    ]


@pytest.mark.parametrize("e2e_db", ["postgres"], indirect=True)  # one database (tests/e2e/conftest.py: e2e_db)
def test_a_frozen_agent_kills_its_old_run_and_the_master_refuses_it(e2e_db, make_cluster, enterable_tmp: Path) -> None:
    # a reconnect wait of 4 s rather than the default 8 s: a1 is frozen past it either way
    c = make_cluster({"agent_reconnect_wait": f"{RECONNECT_WAIT}s"}, db=e2e_db)
    shared = enterable_tmp / "files"  # the trial, run as its user's own uid, looks for one and writes the other
    shared.mkdir()
    shared.chmod(0o777)
    wake, progress = shared / "wake", shared / "orphan-reports"
    a1 = c.add_agent("a1")
    exp_id = c.create(
        {
            "name": "fencing",
            "entrypoint": "python3 train.py",
            "max_restarts": 2,
            "hyperparameters": {
                "steps": TOTAL,
                "delay": 0.05,
                "ckpt_every": 5,
                "quiet_at": QUIET_AT,
                "wake_file": str(wake),
                "progress_file": str(progress),
            },
            "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": TOTAL}},
            "resources": {"slots_per_trial": 1},
        },
        model_dir=MODELS / "orphan",
    )

    def quiet() -> dict | None:
        trials = c.trials(exp_id)
        lines = _log_lines(c, trials[0]["id"]) if trials else []
        return next((line for line in lines if line["message"].startswith("quiet pid")), None)

    first = wait_for(quiet, 90, what="the first run to go quiet")
    trial_id, old_allocation = first["trialId"], first["allocationId"]
    (group,) = task_processes.task_groups(a1.pid)  # the pid the trial prints is its own PID namespace's
    old_pid = task_processes.host_pid(task_processes.task_namespace(group), int(first["message"].split()[2]))
    assert old_pid is not None
    c.add_agent("a2")

    a1.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: _agent_state(c, "a1") == "GONE", 60, what="a1 declared lost")
        wait_for(
            lambda: any(
                line["allocationId"] != old_allocation and "resumed from" in line["message"]
                for line in _log_lines(c, trial_id)
            ),
            90,
            what="the trial to restart on a2",
        )
        # the orphan wakes and reports with its old task token while its agent is still frozen
        wake.touch()
        wait_for(lambda: len(_orphan_reports(progress)) >= 5, 30, what="the orphan's reports")
        assert _alive(old_pid)  # nothing but its own agent can stop it
    finally:
        a1.signal(signal.SIGCONT)

    wait_for(lambda: not _alive(old_pid), 60, what="a1 to kill the old run")
    after_kill = _orphan_reports(progress)
    wait_for(lambda: _agent_state(c, "a1") == "CONNECTED", 60, what="a1 to reconnect")
    a1_log = a1.log_text()
    assert "killing 1 task(s)" in a1_log and f"reconnect wait of {RECONNECT_WAIT} s" in a1_log
    # the kill came first: before a1 registered again
    assert a1_log.count("registered with the master") == 2
    assert a1_log.index("killing 1 task(s)") < a1_log.rindex("registered with the master")

    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(exp_id)
    assert trial["restarts"] == 1

    # the old run's output stopped with its process
    assert _orphan_reports(progress) == after_kill
    old_lines = [line["message"] for line in _log_lines(c, trial_id) if line["allocationId"] == old_allocation]
    orphan_lines = [m for m in old_lines if m.startswith("orphan step")]
    assert len(orphan_lines) <= len(after_kill)

    # the master refused every report the orphan made after its allocation was lost
    assert {status for _, _, status in after_kill} == {"401"}
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in metrics] == list(range(1, TOTAL + 1))
    old_run = {m["trialRunId"] for m in metrics if m["stepsCompleted"] == 1}
    assert all(m["stepsCompleted"] <= QUIET_AT for m in metrics if m["trialRunId"] in old_run)
    assert all(m["metrics"]["loss"] > 0 for m in metrics)  # none is the orphan's (loss -1)
