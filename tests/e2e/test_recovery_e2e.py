"""Faults on real processes: an agent killed with SIGKILL mid-trial, and pause / kill
that survive a master restart."""

from __future__ import annotations

import os
import signal

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config
from tests.support import task_processes

pytestmark = pytest.mark.e2e


def test_a_sigkilled_agent_trial_restarts_elsewhere_from_its_checkpoint(e2e_db, make_cluster) -> None:
    c = make_cluster({"agent_reconnect_wait": "3s", "agent_heartbeat_timeout": "2s"}, db=e2e_db)
    doomed = c.add_agent("doomed")
    exp_id = c.create(steps_config(steps=60, delay=0.1, ckpt_every=5, resumed_delay=0.01))
    wait_for(lambda: "step 12 " in c.logs(c.trials(exp_id)[0]["id"]), 60, what="the trial at step 12")
    c.add_agent("spare")
    (task_group,) = task_processes.task_groups(doomed.pid)  # the pid the trial prints is its namespace's
    os.kill(doomed.pid, signal.SIGKILL)  # the machine dies: agent and task process together
    os.killpg(task_group, signal.SIGKILL)
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(exp_id)
    assert trial["restarts"] == 1
    logs = c.logs(trial["id"])
    assert "resumed from" in logs and "was lost" in logs
    metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in metrics] == list(range(1, 61))  # none lost, none twice
    agents_used = {line["agentId"] for line in _log_lines(c, trial["id"]) if line["agentId"]}
    assert agents_used == {"doomed", "spare"}


def _log_lines(c: Cluster, trial_id: int) -> list[dict]:
    import json

    text = c.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    return [json.loads(line)["result"] for line in text.splitlines() if line]


def test_pause_and_kill_survive_a_master_restart(e2e_db, make_cluster) -> None:
    c = make_cluster({"agent_reconnect_wait": "30s"}, db=e2e_db)
    c.add_agent("a1", slots=2)
    # 400 steps of 0.05 s leave the pause ample time to land; resumed, the rest runs 10x faster
    paused = c.create(steps_config(name="to-pause", steps=400, delay=0.05, ckpt_every=5, resumed_delay=0.005))
    killed = c.create(steps_config(name="to-kill", steps=4000, delay=0.05, ckpt_every=1000))
    for exp_id in (paused, killed):
        wait_for(lambda e=exp_id: "step 3 " in c.logs(c.trials(e)[0]["id"]), 60, what="trials running")
    c.master.api("POST", f"/api/v1/experiments/{paused}/pause")
    wait_for(lambda: c.trials(paused)[0]["state"] == "STATE_PAUSED", 60, what="trial paused")
    c.restart_master()
    assert c.master.api("GET", f"/api/v1/experiments/{paused}")["experiment"]["state"] == "STATE_PAUSED"
    c.master.api("POST", f"/api/v1/experiments/{killed}/kill")
    c.restart_master()  # the kill is recorded; the agent is told again when it reconnects
    assert wait_experiment(c.master, killed, {"STATE_CANCELED"}, timeout=90)["state"] == "STATE_CANCELED"
    assert c.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"] == {}
    c.master.api("POST", f"/api/v1/experiments/{paused}/activate")
    exp = wait_experiment(c.master, paused, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(paused)
    assert trial["restarts"] == 0 and "resumed from" in c.logs(trial["id"])
