"""`pedl instance list`: instances in a table, and when there are none, why (a pool of static agents
has no instances at all)."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster


def pool(name: str, provider: dict | None = None) -> dict:
    return {
        "name": name,
        "provider": provider,
        "numAgents": 1,
        "slotsUsed": 0,
        "slotsAvailable": 2,
        "queuedTasks": 0,
        "pendingSlots": 0,
        "numInstances": 0,
    }


LOCAL = {"type": "local", "spot": False, "instanceTypes": ["local"]}
INSTANCE = {
    "id": "i-1",
    "resourcePool": "cloud",
    "instanceType": "local",
    "spot": False,
    "state": "RUNNING",
    "slots": 1,
    "launchedAt": 0.0,
    "registeredAt": 1.0,
    "idleSeconds": 5.0,
    "instanceHours": 0.5,
    "cost": 0.0,
    "terminationReason": None,
}


def serve(master: FakeMaster, pools: list[dict], instances: list[dict]) -> None:
    master.route("GET", "/api/v1/resource-pools", {"resourcePools": pools})
    master.route("GET", "/api/v1/instances", {"instances": instances})


def test_a_static_pool_says_it_has_static_agents_only(cli, master: FakeMaster) -> None:
    serve(master, [pool("default"), pool("cloud", LOCAL)], [])
    result = cli("instance", "list", "--pool", "default")
    assert result.exit_code == 0, result.output
    assert "Pool default has static agents only" in result.stdout and "pedl agent list" in result.stdout
    assert "Instance" not in result.stdout  # no empty table
    assert master.calls("GET", "/api/v1/instances")[0].q("resourcePool") == "default"


def test_no_pool_with_a_provider_is_said_so(cli, master: FakeMaster) -> None:
    serve(master, [pool("default"), pool("gpu")], [])
    out = cli("instance", "list").stdout
    assert "Every pool has static agents only (none has a provider)" in out


def test_an_empty_dynamic_pool_and_an_unknown_pool(cli, master: FakeMaster) -> None:
    serve(master, [pool("default"), pool("cloud", LOCAL)], [])
    assert "No instances in pool cloud (--all also lists terminated ones)." in cli("instance", "list").stdout
    assert "No instances in pool cloud." in cli("instance", "list", "--pool", "cloud", "--all").stdout
    unknown = cli("instance", "list", "--pool", "nope")
    assert unknown.exit_code == 1 and "no resource pool named 'nope'; the pools: default, cloud" in unknown.output


def test_instances_are_a_table_and_json_stays_a_list(cli, master: FakeMaster) -> None:
    serve(master, [pool("cloud", LOCAL)], [INSTANCE])
    table = cli("instance", "list").stdout
    assert "i-1" in table and "RUNNING" in table and "static agents" not in table
    serve(master, [pool("default")], [])
    assert json.loads(cli("instance", "list", "--json").stdout) == []
