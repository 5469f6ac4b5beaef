"""Scheduling policies on real processes: a more urgent trial preempts a less urgent one, which
checkpoints, waits, and resumes from its checkpoint."""

from __future__ import annotations

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("e2e_db", ["sqlite"], indirect=True)  # one database (tests/e2e/conftest.py: e2e_db)
def test_an_urgent_trial_preempts_and_the_preempted_one_resumes(e2e_db, make_cluster) -> None:
    c = make_cluster({"resource_pools": [{"pool_name": "default", "scheduler": {"preemption": True}}]}, db=e2e_db)
    c.add_agent("a1", slots=1)
    low_cfg = steps_config(name="low", steps=40, delay=0.1, ckpt_every=2)
    low_cfg["resources"]["priority"] = 60
    low = c.create(low_cfg)
    wait_for(lambda: "step 3 " in c.logs(c.trials(low)[0]["id"]), 60, what="the low-priority trial running")
    urgent_cfg = steps_config(name="urgent", steps=4)
    urgent_cfg["resources"]["priority"] = 10
    urgent = c.create(urgent_cfg)
    assert wait_experiment(c.master, urgent, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    assert wait_experiment(c.master, low, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(low)
    logs = c.logs(trial["id"])
    assert "preempted at step" in logs and "resumed from" in logs
    assert trial["restarts"] == 0  # a preemption is not a failure
    steps = [
        m["stepsCompleted"]
        for m in c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    ]
    assert steps == list(range(1, 41))
