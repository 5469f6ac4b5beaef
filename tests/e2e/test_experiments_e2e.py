"""A whole experiment on real processes: grid search on two agents, metrics, checkpoints, logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment
from tests.e2e import completed_checkpoints
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e
EXAMPLES = Path(__file__).parents[2] / "examples"


@pytest.mark.parametrize("any_db_cluster", ["sqlite"], indirect=True)  # one database (tests/e2e/conftest.py: e2e_db)
def test_numpy_grid_completes_on_two_agents(any_db_cluster) -> None:
    c = any_db_cluster
    c.add_agent("a1")
    c.add_agent("a2")
    text = (EXAMPLES / "numpy_mlp" / "grid.yaml").read_text()
    exp_id = c.create(text, EXAMPLES / "numpy_mlp")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}, timeout=240)
    assert exp["state"] == "STATE_COMPLETED", exp
    trials = c.trials(exp_id)
    assert len(trials) == 3
    assert sorted(t["hparams"]["learning_rate"] for t in trials) == pytest.approx([0.001, 0.01, 0.1])
    for t in trials:
        assert t["state"] == "STATE_COMPLETED"
        assert t["totalBatchesProcessed"] == 1000
        assert t["searcherMetricValue"] is not None
        workloads = c.master.api("GET", f"/api/v1/trials/{t['id']}/workloads")["workloads"]
        assert any("validation" in w for w in workloads) and any("checkpoint" in w for w in workloads)
    # the learning rate matters: the best trial is not the smallest rate
    best = min(trials, key=lambda t: t["searcherMetricValue"])
    assert best["hparams"]["learning_rate"] > 0.001
    # the experiment's checkpoint GC runs as a task once it ends: a checkpoint leaves COMPLETED before the
    # task may delete its files, so those the API calls COMPLETED have theirs
    ckpts = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
    kept = completed_checkpoints.with_files(c.master, ckpts, lambda ck: (c.work / "ckpts" / ck["uuid"]).is_dir())
    deleted = [ck for ck in ckpts if ck["state"] == "STATE_DELETED"]
    assert kept
    assert all(not (c.work / "ckpts" / ck["uuid"]).exists() for ck in deleted)
    # both agents ran something
    assert {a for t in trials for a in _agents_of_trial(c, t["id"])} == {"a1", "a2"}


def _agents_of_trial(c, trial_id: int) -> set[str]:
    import json

    text = c.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    return {json.loads(line)["result"]["agentId"] for line in text.splitlines() if line} - {""}


def test_trial_restarts_from_checkpoint_after_a_crash(cluster) -> None:
    cluster.add_agent("a1")
    exp_id = cluster.create(steps_config(steps=12, ckpt_every=5, fail_at=7))
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 1
    assert trial["totalBatchesProcessed"] == 12
    logs = cluster.logs(trial["id"])
    assert "crashing at step 7" in logs
    assert "at step 5" in logs  # resumed from the step-5 checkpoint
    # steps 6 and 7 were reported twice (before the crash and after the resume) but stored once
    metrics = cluster.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    steps = [m["stepsCompleted"] for m in metrics]
    assert steps == list(range(1, 13))


def test_missing_entrypoint_ends_in_error_with_the_reason_in_the_logs(cluster) -> None:
    cluster.add_agent("a1")
    cfg = steps_config(max_restarts=1)
    cfg["entrypoint"] = "./no-such-program --flag"
    exp_id = cluster.create(cfg)
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_ERROR"
    (trial,) = cluster.trials(exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert trial["restarts"] == 1
    logs = cluster.logs(trial["id"])
    assert "no-such-program" in logs
    assert "exited with code" in logs or "not found" in logs.lower()


def test_kill_stops_the_process_and_cancels(cluster) -> None:
    cluster.add_agent("a1")
    exp_id = cluster.create(steps_config(steps=2000, delay=0.05, ckpt_every=1000))
    from pedl.devcluster import wait_for

    wait_for(lambda: cluster.trials(exp_id)[0]["state"] == "STATE_RUNNING", 60, what="trial running")
    wait_for(lambda: "step 3" in cluster.logs(cluster.trials(exp_id)[0]["id"]), 60, what="steps")
    cluster.master.api("POST", f"/api/v1/experiments/{exp_id}/kill")
    exp = wait_experiment(cluster.master, exp_id, {"STATE_CANCELED"}, timeout=60)
    assert exp["state"] == "STATE_CANCELED"
    assert cluster.trials(exp_id)[0]["state"] == "STATE_CANCELED"
    tasks = cluster.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"]
    assert tasks == {}


def test_pause_checkpoints_and_activate_resumes(cluster) -> None:
    from pedl.devcluster import wait_for

    cluster.add_agent("a1")
    exp_id = cluster.create(steps_config(steps=60, delay=0.1, ckpt_every=2, resumed_delay=0.01))
    wait_for(lambda: "step 3" in cluster.logs(cluster.trials(exp_id)[0]["id"]), 60, what="steps")
    cluster.master.api("POST", f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: cluster.trials(exp_id)[0]["state"] == "STATE_PAUSED", 60, what="trial paused")
    trial_id = cluster.trials(exp_id)[0]["id"]
    assert "preempted at step" in cluster.logs(trial_id)
    cluster.master.api("POST", f"/api/v1/experiments/{exp_id}/activate")
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = cluster.trials(exp_id)
    assert trial["restarts"] == 0  # a pause is not a failure
    assert "resumed from" in cluster.logs(trial_id)
