"""Checkpoint GC as a task on a real agent: an experiment's collection runs as "Checkpoint GC (Experiment
N)", listed in the legacy /tasks while it runs (as Determined's e2e suite polls it) and gone after; its
checkpoints end DELETED with their directories gone, the kept one stays, and its log says what it did."""

from __future__ import annotations

import json
import threading

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e


def test_an_experiments_gc_runs_as_a_task_on_the_agent(cluster) -> None:
    c = cluster
    c.add_agent("a1")
    config = {
        **steps_config("gc-task"),
        "checkpoint_storage": {
            "type": "shared_fs",
            "host_path": str(c.ckpts),
            "save_trial_latest": 1,
            "save_trial_best": 0,
            "save_experiment_best": 0,
        },
    }
    seen: set[str] = set()
    stop = threading.Event()

    def poll() -> None:  # as the suite's wait_for_gc_to_finish does
        while not stop.is_set():
            seen.update(t["name"] for t in c.master.api("GET", "/tasks").values())
            stop.wait(0.01)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    exp_id = c.create(config)
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
    assert exp["state"] == "STATE_COMPLETED", exp
    name = f"Checkpoint GC (Experiment {exp_id})"

    def deleted() -> list[dict] | None:
        ckpts = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        gone = [ck for ck in ckpts if ck["state"] == "STATE_DELETED"]
        return ckpts if gone and name not in [t["name"] for t in c.master.api("GET", "/tasks").values()] else None

    ckpts = wait_for(deleted, 120, what="the GC task to delete checkpoints and leave /tasks")
    stop.set()
    poller.join()
    assert name in seen
    kept = [ck for ck in ckpts if ck["state"] == "STATE_COMPLETED"]
    gone = [ck for ck in ckpts if ck["state"] == "STATE_DELETED"]
    assert len(kept) == 1 and len(gone) == len(ckpts) - 1
    assert (c.work / "ckpts" / kept[0]["uuid"]).is_dir()
    assert all(not (c.work / "ckpts" / ck["uuid"]).exists() for ck in gone)
    events = c.master.api("GET", f"/api/v1/experiments/{exp_id}/events")["events"]
    task_id = next(e["message"].split()[3] for e in events if e["message"].startswith("checkpoint GC task "))
    task = c.master.api("GET", f"/api/v1/tasks/{task_id}")["task"]
    assert task["taskType"] == "TASK_TYPE_CHECKPOINT_GC"
    assert task["allocations"][0]["state"] == "STATE_TERMINATED" and task["allocations"][0]["statusCode"] == 0
    text = c.master.api("GET", f"/api/v1/tasks/{task_id}/logs", follow="false")
    lines = [json.loads(line)["result"]["log"] for line in text.splitlines() if line]
    assert all(any(f"checkpoint {ck['uuid']}: deleted" in line for line in lines) for ck in gone), lines
