"""A notebook on dynamic agents (the local provider, real processes): one that asks for a slot on an
empty pool launches an instance and runs there; once it is killed, the instance idles out and is
terminated."""

from __future__ import annotations

import pytest

from pedl.devcluster import wait_for
from tests.e2e.test_dynamic_local_e2e import instances, local_pool

pytestmark = pytest.mark.e2e


def test_a_notebook_on_an_empty_pool_launches_an_instance_that_ends_after_it(make_cluster) -> None:
    c = make_cluster(local_pool(max_instances=1))
    assert instances(c) == []
    nb = c.master.api("POST", "/api/v1/notebooks", {"config": {"resources": {"slots": 1}}})["notebook"]
    (inst,) = wait_for(lambda: instances(c) or None, 60, what="an instance launched for the notebook")

    def ready() -> bool:
        task = c.master.api("GET", f"/api/v1/tasks/{nb['id']}")["task"]
        assert task["endTime"] is None, f"the notebook ended: {task['allocations']}"
        return bool(task["allocations"] and task["allocations"][0]["isReady"])

    wait_for(ready, 120, what="the notebook to be ready")
    summaries = c.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"]
    placed = summaries[f"{nb['id']}.1"]["resources"][0]["agentDevices"]
    assert list(placed) == [inst["id"]]  # it runs on the instance launched for it
    # while the notebook holds the slot the instance is busy, not idle
    assert next(i for i in instances(c) if i["id"] == inst["id"])["state"] == "RUNNING"
    c.master.api("POST", f"/api/v1/notebooks/{nb['id']}/kill")
    gone = wait_for(
        lambda: [i for i in instances(c) if i["state"] == "TERMINATED"], 60, what="the idle instance to be terminated"
    )
    assert gone[0]["id"] == inst["id"] and "idle for more than 3s" in gone[0]["terminationReason"]
    assert c.master.api("GET", f"/api/v1/notebooks/{nb['id']}")["notebook"]["state"] == "STATE_TERMINATED"
