"""Dynamic agents with the local provider, on real processes: launch on demand, run, terminate
when idle; adoption after a master crash; tasks that can never fit fail at once."""

from __future__ import annotations

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config

pytestmark = pytest.mark.e2e


def local_pool(**kw) -> dict:
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "max_instances": 2,
        "boot_delay": "0.5s",
        "max_idle_agent_period": "3s",
        **kw,
    }
    return {"resource_pools": [{"pool_name": "default", "provider": provider}]}


def instances(c: Cluster, all_: bool = True) -> list[dict]:
    return c.master.api("GET", "/api/v1/instances", all="true" if all_ else "false")["instances"]


def test_an_empty_pool_launches_runs_and_terminates_idle_instances(make_cluster) -> None:
    c = make_cluster(local_pool())
    assert instances(c) == []
    exp_id = c.create(steps_config(steps=5))
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    (inst,) = instances(c)
    assert inst["registeredAt"] is not None
    agent_ids = {a["id"] for a in c.master.api("GET", "/api/v1/agents")["agents"]}
    assert inst["id"] in agent_ids  # the agent registered under the instance id
    gone = wait_for(
        lambda: [i for i in instances(c) if i["state"] == "TERMINATED"], 60, what="the idle instance to be terminated"
    )
    assert "idle for more than 3s" in gone[0]["terminationReason"]
    assert instances(c, all_=False) == []


def test_a_restarted_master_adopts_its_instances_and_launches_nothing_twice(make_cluster) -> None:
    c = make_cluster({**local_pool(max_idle_agent_period="60s"), "agent_reconnect_wait": "30s"})
    exp_id = c.create(steps_config(steps=60, delay=0.1, ckpt_every=10))
    wait_for(lambda: c.trials(exp_id)[0]["state"] == "STATE_RUNNING", 60, what="trial running")
    (before,) = instances(c)
    c.restart_master()
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    after = instances(c)
    assert [i["id"] for i in after] == [before["id"]]  # the same instance, no second launch
    assert after[0]["state"] == "RUNNING"
    assert c.trials(exp_id)[0]["restarts"] == 0


def test_a_trial_that_can_never_fit_fails_at_once(make_cluster) -> None:
    c = make_cluster(local_pool(slots_per_instance=2, max_instances=1))
    cfg = steps_config()
    cfg["resources"]["slots_per_trial"] = 3
    exp_id = c.create(cfg)
    exp = wait_experiment(c.master, exp_id, {"STATE_ERROR", "STATE_COMPLETED"}, timeout=30)
    assert exp["state"] == "STATE_ERROR"
    (trial,) = c.trials(exp_id)
    assert trial["state"] == "STATE_ERROR"
    assert "no allowed instance type fits" in trial["endReason"]
    assert instances(c) == []  # nothing was launched for it
    events = c.master.api("GET", f"/api/v1/experiments/{exp_id}/events")["events"]
    assert any("can never be scheduled" in e["message"] for e in events)
