"""GET /metrics on a real master while an experiment runs on dynamic local agents (real processes):
parsed with prometheus-client's own parser, its figures match the API's resource pools, instances
and tasks, and its counters match what the trial reported."""

from __future__ import annotations

from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import Cluster, steps_config

pytestmark = pytest.mark.e2e

POOL_GAUGES = {  # gauge -> the resource-pool API's field for it
    "pedl_pool_pending_allocations": "queuedTasks",
    "pedl_pool_pending_slots": "pendingSlots",
    "pedl_pool_running_allocations": "runningTasks",
    "pedl_pool_slots_used": "slotsUsed",
    "pedl_pool_slots_capacity": "slotsAvailable",
    "pedl_pool_agents": "numAgents",
}


def scrape(c: Cluster) -> dict[str, list]:
    """{family name: its samples}, as a Prometheus server would read them."""
    text = c.master.api("GET", "/metrics")
    assert isinstance(text, str) and text.startswith("# HELP")
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(families: dict[str, list], sample: str, **labels: str) -> float | None:
    family = sample.removesuffix("_total").removesuffix("_count").removesuffix("_sum")
    for s in families.get(family, []):
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    return None


def api_view(c: Cluster) -> dict:
    """What the API says, without the fields that move with time (idle seconds, cost)."""
    pools = {
        p["name"]: {f: p[f] for f in (*POOL_GAUGES.values(), "numInstances")}
        | {"backoff": (p.get("provisioning") or {}).get("backoffUntil")}
        for p in c.master.api("GET", "/api/v1/resource-pools")["resourcePools"]
    }
    instances = sorted(
        (i["resourcePool"], i["instanceType"], "spot" if i["spot"] else "on-demand", i["state"])
        for i in c.master.api("GET", "/api/v1/instances")["instances"]
    )
    tasks = sorted(
        (t["resourcePool"], t["state"], t["slotsNeeded"])
        for t in c.master.api("GET", "/api/v1/tasks")["allocationIdToSummary"].values()
    )
    return {"pools": pools, "instances": instances, "tasks": tasks}


def steady_scrape(c: Cluster) -> tuple[dict, dict[str, list]]:
    """A scrape taken while the API said the same before and after it."""

    def once() -> tuple[dict, dict[str, list]] | None:
        before = api_view(c)
        families = scrape(c)
        return (before, families) if api_view(c) == before else None

    return wait_for(once, 30, what="the cluster to hold still for one scrape")


def test_scraped_figures_match_the_api_while_an_experiment_runs(make_cluster) -> None:
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "max_instances": 2,
        "boot_delay": "0.5s",
        "max_idle_agent_period": "60s",
    }
    c = make_cluster({"resource_pools": [{"pool_name": "default", "provider": provider}]})
    exp_id = c.create(steps_config(steps=40, delay=0.1, ckpt_every=10))
    wait_for(lambda: c.trials(exp_id)[0]["state"] == "STATE_RUNNING", 60, what="the trial to run")

    api, families = steady_scrape(c)
    pool = api["pools"]["default"]
    assert pool["slotsUsed"] == 1 and pool["numInstances"] == 1  # the trial runs on the one launched instance
    for gauge, field in POOL_GAUGES.items():
        assert value(families, gauge, pool="default") == pool[field], gauge
    scraped_instances = Counter(
        {
            (s.labels["pool"], s.labels["instance_type"], s.labels["market"], s.labels["state"]): int(s.value)
            for s in families["pedl_instances"]
        }
    )
    assert scraped_instances == Counter(api["instances"])
    queued = [t for t in api["tasks"] if t[1] == "STATE_QUEUED"]
    assert value(families, "pedl_pool_pending_allocations", pool="default") == len(queued)
    assert value(families, "pedl_pool_running_allocations", pool="default") == len(api["tasks"]) - len(queued)
    assert value(families, "pedl_pool_slots_used", pool="default") == sum(
        t[2] for t in api["tasks"] if t[1] != "STATE_QUEUED"
    )
    assert value(families, "pedl_provisioner_backoff", pool="default") == 0 and pool["backoff"] is None
    launched = c.master.api("GET", "/api/v1/instances", all="true")["instances"]
    assert (
        value(families, "pedl_instance_launches_total", pool="default", instance_type="local", market="on-demand")
        == len(launched)
        == 1
    )
    assert "pedl_instance_launch_failures" not in families or not families["pedl_instance_launch_failures"]
    assert value(families, "pedl_scheduling_pass_seconds_count") > 0
    assert value(families, "pedl_provisioner_pass_seconds_count", pool="default") > 0

    routes = {s.labels["route"] for s in families["pedl_api_request_duration_seconds"]}
    assert {"/api/v1/resource-pools", "/api/v1/experiments/{experiment_id}/trials"} <= routes
    assert not any(f"/{exp_id}/" in r or r.endswith(f"/{exp_id}") for r in routes)  # templates, never raw paths

    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(exp_id)
    families = scrape(c)
    for group, reported in (("training", 40), ("validation", 4)):
        stored = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group=group)["metrics"]
        assert value(families, "pedl_metric_reports_total", group=group) == len(stored) == reported, group
