"""Faults on real processes: agents that vanish and come back, a master killed with SIGKILL, and
agents with a wrong token."""

from __future__ import annotations

import json
import signal
import time

import pytest

from pedl.devcluster import LocalAgent, wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config

pytestmark = pytest.mark.e2e


def _agent_state(c: Cluster, agent_id: str) -> str:
    agents = c.master.api("GET", "/api/v1/agents")["agents"]
    return next(a["state"] for a in agents if a["id"] == agent_id)


def _running_trial(c: Cluster, exp_id: int, min_step: int) -> dict:
    def ready() -> dict | None:
        trials = c.trials(exp_id)
        if trials and trials[0]["state"] == "STATE_RUNNING" and f"step {min_step} " in c.logs(trials[0]["id"]):
            return trials[0]
        return None

    return wait_for(ready, 90, what=f"trial at step {min_step}")


def test_agent_back_within_the_wait_keeps_its_trial(cluster: Cluster) -> None:
    agent = cluster.add_agent("a1")
    exp_id = cluster.create(steps_config(steps=80, delay=0.1, ckpt_every=20))
    trial = _running_trial(cluster, exp_id, 3)
    agent.signal(signal.SIGSTOP)  # heartbeats stop; the task process keeps running
    try:
        wait_for(lambda: _agent_state(cluster, "a1") == "DISCONNECTED", 30, what="agent disconnected")
    finally:
        agent.signal(signal.SIGCONT)
    wait_for(lambda: _agent_state(cluster, "a1") == "CONNECTED", 30, what="agent reconnected")
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    (after,) = cluster.trials(exp_id)
    assert after["restarts"] == 0
    text = cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/logs", follow="false")
    runs = {
        json.loads(line)["result"]["allocationId"]
        for line in text.splitlines()
        if line and " pid " in json.loads(line)["result"]["message"]
    }
    assert len(runs) == 1  # one run ran the whole trial (its pid is the same in every PID namespace of its own)


def test_agent_back_after_the_wait_restarts_its_trial(make_cluster) -> None:
    # a wait shorter than the default 8 s (+ 3 s of heartbeat timeout): only being past it matters
    cluster = make_cluster({"agent_reconnect_wait": "3s", "agent_heartbeat_timeout": "2s"})
    agent = cluster.add_agent("a1")
    exp_id = cluster.create(steps_config(steps=60, delay=0.1, ckpt_every=5, resumed_delay=0.01))
    _running_trial(cluster, exp_id, 7)
    agent.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: _agent_state(cluster, "a1") == "GONE", 60, what="agent given up")
    finally:
        agent.signal(signal.SIGCONT)
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 1
    logs = cluster.logs(trial["id"])
    assert "was lost" in logs
    assert "resumed from" in logs
    steps = [
        m["stepsCompleted"]
        for m in cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    ]
    assert steps == list(range(1, 61))


def test_master_killed_and_restarted_keeps_everything_and_continues(e2e_db, make_cluster) -> None:
    c = make_cluster({"agent_reconnect_wait": "30s"}, db=e2e_db)
    c.add_agent("a1")
    done_id = c.create(steps_config(name="finished", steps=3))
    wait_experiment(c.master, done_id, {"STATE_COMPLETED"})
    exp_id = c.create(steps_config(name="running", steps=50, delay=0.1, ckpt_every=10))
    trial = _running_trial(c, exp_id, 12)
    before = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    ckpts_before = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    assert ckpts_before
    c.master.kill()
    time.sleep(2)  # the trial keeps reporting into the void; the library retries
    c.master.start()
    # what was stored survives
    finished = c.master.api("GET", f"/api/v1/experiments/{done_id}")["experiment"]
    assert finished["state"] == "STATE_COMPLETED"
    (done_trial,) = c.trials(done_id)
    assert "done" in c.logs(done_trial["id"])
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (after,) = c.trials(exp_id)
    assert after["restarts"] == 0  # the agent reconnected with its task still running
    metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    steps = [m["stepsCompleted"] for m in metrics]
    assert steps == list(range(1, 51))  # reports made while the master was down arrived
    assert len(metrics) > len(before)
    uuids = {ck["uuid"] for ck in c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]}
    assert {ck["uuid"] for ck in ckpts_before} <= uuids


def test_agent_with_a_wrong_token_is_refused_and_logged(tmp_path, make_cluster) -> None:
    c = make_cluster({"agent_token": "right-token"})
    bad = LocalAgent(tmp_path, c.master.url, "intruder", token="wrong-token").start()
    wait_for(lambda: not bad.alive(), 30, what="the refused agent to exit")
    assert bad.proc.returncode != 0
    assert "refused agent connection" in c.master.log_text()
    agents = c.master.api("GET", "/api/v1/agents")["agents"]
    assert all(a["id"] != "intruder" for a in agents)
    c.add_agent("good", token="right-token")
    bad.stop()
