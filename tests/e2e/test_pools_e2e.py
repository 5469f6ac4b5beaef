"""Several resource pools, each with its own provider: zero-slot tasks go to the aux pool, GPU-slot
tasks to the compute pool; and an experiment says which of its trials kept failing, and why."""

from __future__ import annotations

import pytest

from pedl.devcluster import wait_experiment
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e


def test_tasks_go_to_their_kind_of_pool_and_failed_trials_are_reported(make_cluster) -> None:
    local = {"type": "local", "max_instances": 2, "max_idle_agent_period": "30s"}
    c = make_cluster(
        {
            "resource_pools": [
                {"pool_name": "compute", "provider": {**local, "slots_per_instance": 1}},
                {"pool_name": "aux", "provider": {**local, "slots_per_instance": 0}},
            ],
            "default_compute_resource_pool": "compute",
            "default_aux_resource_pool": "aux",
        }
    )
    cpu_cfg = steps_config(name="cpu-only", steps=3)
    cpu_cfg["resources"]["slots_per_trial"] = 0
    cpu = c.create(cpu_cfg)
    mixed_cfg = steps_config(name="mixed", steps=3, max_restarts=1)
    mixed_cfg["hyperparameters"]["always_fail"] = {"type": "categorical", "vals": [False, True]}
    mixed_cfg["searcher"]["name"] = "grid"
    mixed = c.create(mixed_cfg)
    assert wait_experiment(c.master, cpu, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    exp = wait_experiment(c.master, mixed, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"  # one trial completed; the failing one is reported
    failed = [t for t in c.trials(mixed) if t["state"] == "STATE_ERROR"]
    assert len(failed) == 1 and failed[0]["hparams"]["always_fail"] is True
    assert failed[0]["restarts"] == 1 and "exited with code 4" in failed[0]["endReason"]
    assert f"trial {failed[0]['id']}" in exp["endReason"] and "1 of 2 trial(s) failed" in exp["endReason"]
    assert c.master.api("GET", f"/api/v1/experiments/{cpu}")["experiment"]["resourcePool"] == "aux"
    assert exp["resourcePool"] == "compute"
    pools = {i["resourcePool"] for i in c.master.api("GET", "/api/v1/instances", all="true")["instances"]}
    assert pools == {"aux", "compute"}
    listing = {p["name"]: p for p in c.master.api("GET", "/api/v1/resource-pools")["resourcePools"]}
    assert listing["aux"]["defaultAuxPool"] and listing["compute"]["defaultComputePool"]
    assert listing["compute"]["provider"]["type"] == "local"
