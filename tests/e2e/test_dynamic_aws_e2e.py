"""Dynamic agents on AWS APIs, on real processes: a master (SQLite) whose pool's provider is `aws`,
talking to moto through an EC2 fault proxy, and a cloud twin that starts a real `pedl agent run`
for each tagged instance that is running in moto (the harness: tests/e2e/aws_cluster.py). The
scenarios: launch on demand, run and terminate when idle; foreign instances never touched; spot
capacity errors falling back to on-demand; quota errors backing off and shown to users; an instance
terminated under a running trial; a spot interruption notice; a master killed and restarted while
its instances start or run.

Timing is never asserted; counts of EC2 calls (recorded by the proxy) are."""

from __future__ import annotations

import base64
import signal
import time

import httpx
import pytest
from typer.testing import CliRunner

from pedl.cli.main import app as cli_app
from pedl.devcluster import wait_for
from tests.e2e.aws_cluster import (  # noqa: F401 - the fixtures
    BACKOFF,
    BACKOFF_MAX,
    IDLE,
    INSTANCE_NAME,
    INSTANCE_TYPE,
    POOL_TAG,
    TAG_KEY,
    TAG_VALUE,
    AWSCluster,
    cloud_fixture,
    moto_url_fixture,
)
from tests.e2e.conftest import steps_config

pytestmark = pytest.mark.e2e


def run_foreign(c: AWSCluster, tags: dict[str, str]) -> str:
    """An instance someone else started in the same account."""
    reply = c.ec2.run_instances(
        ImageId=c.net.image_id,
        InstanceType=INSTANCE_TYPE,
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return reply["Instances"][0]["InstanceId"]


def max_attempts(window: float, base: float, cap: float) -> int:
    """The most launch attempts an exponential backoff (base, doubling, capped) allows within
    `window` seconds of the first one."""
    attempts, elapsed, delay = 1, 0.0, base
    while elapsed + delay <= window:
        elapsed += delay
        attempts += 1
        delay = min(delay * 2, cap)
    return attempts


# -- 1. scale up from nothing, run, scale down ---------------------------------------------------


def test_an_empty_pool_launches_a_tagged_instance_runs_and_terminates_it_when_idle(cloud) -> None:
    c = cloud()
    assert c.instances() == []
    exp_id = c.create(steps_config(steps=5))
    (inst,) = wait_for(c.instances, 30, what="an instance to be launched")
    tags = c.moto_tags(inst["id"])
    assert tags[TAG_KEY] == TAG_VALUE
    assert tags["Name"] == INSTANCE_NAME
    assert tags[POOL_TAG] == "default"
    attr = c.ec2.describe_instance_attribute(InstanceId=inst["id"], Attribute="userData")
    user_data = base64.b64decode(attr["UserData"]["Value"]).decode()
    assert f"PEDL_MASTER={c.master.url}" in user_data and '--master "$PEDL_MASTER"' in user_data
    assert "--resource-pool default" in user_data
    assert "--slots 1" in user_data  # g4dn.xlarge: one GPU
    # user data is readable on the instance: it carries a single-use secret of its own, not the agent token
    assert c.master.agent_token not in user_data and "export PEDL_AGENT_TOKEN=" in user_data

    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (inst,) = c.instances()
    assert inst["registeredAt"] is not None
    machine = c.twin.machines[inst["id"]]
    assert machine.enrolled_with == "user data" and machine.secret and machine.secret in user_data
    # the agent came with its instance's secret, which is used up now: it no longer downloads the wheel
    package = httpx.get(f"{c.master.url}/api/v1/pedl/package", headers={"X-Pedl-Agent-Token": machine.secret})
    assert package.status_code == 401
    assert (inst["instanceType"], inst["spot"], inst["slots"]) == (INSTANCE_TYPE, False, 1)
    agent_ids = {a["id"] for a in c.master.api("GET", "/api/v1/agents")["agents"]}
    assert inst["id"] in agent_ids  # the agent registered under the instance id

    (gone,) = wait_for(
        lambda: [i for i in c.instances() if i["state"] == "TERMINATED"], 60, what="the idle instance to be terminated"
    )
    assert gone["id"] == inst["id"]
    assert f"idle for more than {IDLE:g}s" in gone["terminationReason"]
    assert gone["terminatedAt"] is not None
    assert c.moto_state(inst["id"]) in ("shutting-down", "terminated")
    wait_for(lambda: not c.twin.agent(inst["id"]).alive(), 30, what="the twin to kill the vanished agent")
    assert c.instances(all_=False) == []
    assert c.proxy.count("RunInstances") == 1


# -- 2. foreign instances ----------------------------------------------------------------------------


def test_instances_without_the_tag_pair_are_never_touched(cloud) -> None:
    c = cloud()
    untagged = run_foreign(c, {"Name": INSTANCE_NAME, POOL_TAG: "default"})  # no tag pair at all
    other_value = run_foreign(c, {TAG_KEY: "someone-else", POOL_TAG: "default", "Name": INSTANCE_NAME})
    foreign = {untagged, other_value}

    exp_id = c.create(steps_config(steps=5))
    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (ours,) = c.instances()
    assert ours["id"] not in foreign
    wait_for(lambda: c.instances()[0]["state"] == "TERMINATED", 60, what="our idle instance to be terminated")
    assert c.moto_state(ours["id"]) in ("shutting-down", "terminated")
    # through scale-up and scale-down, the foreign instances ran on, unknown to the master
    for inst_id in foreign:
        assert c.moto_state(inst_id) == "running"
    assert {i["id"] for i in c.instances()} == {ours["id"]}
    assert not foreign & set(c.twin.machines)  # and no agent ever ran on them
    for call in ("TerminateInstances", "CreateTags"):
        assert c.proxy.failed(call) == 0


# -- 3. spot capacity: fall back to on-demand ----------------------------------------------------


def test_spot_capacity_errors_fall_back_to_on_demand(cloud) -> None:
    c = cloud(provider={"spot": True})
    c.proxy.fail(
        "RequestSpotInstances",
        "InsufficientInstanceCapacity",
        f"We currently do not have sufficient {INSTANCE_TYPE} capacity in the Availability Zone you "
        "requested (us-east-1a).",
    )
    exp_id = c.create(steps_config(steps=5))
    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (inst,) = c.instances()
    assert inst["spot"] is False
    assert c.moto_instance(inst["id"]).get("InstanceLifecycle") != "spot"
    assert c.proxy.failed("RequestSpotInstances") >= 1
    assert c.proxy.count("RunInstances") == 1
    pool = c.pool()
    said = [e["message"] for e in pool["recentEvents"]] + [pool["provisioning"]["lastError"] or ""]
    assert any("InsufficientInstanceCapacity" in m for m in said), said
    assert any(u["spot"] and u["instanceType"] == INSTANCE_TYPE for u in pool["provisioning"]["unavailable"])


# -- 4. quota errors back off, are shown, and launching resumes once cleared ------------------------


def test_quota_errors_back_off_show_to_users_and_launching_resumes_when_cleared(cloud, monkeypatch, tmp_path) -> None:
    c = cloud()
    c.proxy.fail(
        "RunInstances",
        "InstanceLimitExceeded",
        "You have requested more instances (1) than your current instance limit of 0 allows for the "
        "specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request to request "
        "an adjustment to this limit.",
    )
    submitted = time.monotonic()
    exp_id = c.create(steps_config(steps=5))
    first = c.proxy.wait_call("RunInstances", submitted, 30)

    pool = wait_for(lambda: (p := c.pool())["provisioning"]["lastError"] and p, 30, what="the pool's lastError")
    assert "InstanceLimitExceeded" in pool["provisioning"]["lastError"]
    assert "retrying in" in pool["provisioning"]["lastError"]
    wait_for(
        lambda: any("waiting for capacity" in m and "InstanceLimitExceeded" in m for m in c.events(exp_id)),
        30,
        what="the experiment's 'waiting for capacity' event",
    )
    monkeypatch.setenv("PEDL_CONFIG_DIR", str(tmp_path / "pedl-config"))
    monkeypatch.setenv("COLUMNS", "250")
    out = CliRunner().invoke(cli_app, ["-m", c.master.url, "resource-pool", "describe", "default"])
    assert out.exit_code == 0, out.output
    assert "InstanceLimitExceeded" in out.output

    time.sleep(10)  # let the failing period run on; what is asserted is the count of calls within it
    cleared = time.monotonic()
    c.proxy.clear("RunInstances")
    attempts = c.proxy.count("RunInstances", since=first.t, until=cleared)
    passes = c.proxy.count("DescribeInstances", since=first.t, until=cleared) - attempts  # one list per pass
    bound = max_attempts(cleared - first.t, BACKOFF, BACKOFF_MAX) + 1  # +1: clocks of two processes
    assert 2 <= attempts <= bound, f"{attempts} RunInstances in {cleared - first.t:.1f}s, bound {bound}\n{c.explain()}"
    assert attempts < passes, f"{attempts} attempts vs {passes} provisioner passes"
    assert c.proxy.failed("RunInstances") == attempts
    assert c.instances() == []

    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (inst,) = c.instances()
    assert inst["registeredAt"] is not None
    assert c.proxy.count("RunInstances") == attempts + 1  # one success after the clear
    assert c.pool()["provisioning"]["consecutiveErrors"] == 0


# -- 5. an instance terminated under a running trial -----------------------------------------------


def test_an_instance_terminated_under_a_trial_restarts_it_on_new_capacity(cloud) -> None:
    c = cloud()
    exp_id = c.create(steps_config(steps=60, delay=0.1, ckpt_every=5))
    trial = c.running_trial(exp_id, 7)
    (first,) = c.live()
    c.twin.terminate(first["id"])  # in moto, behind the master's back
    wait_for(lambda: not c.twin.agent(first["id"]).alive(), 30, what="the twin to kill the agent")

    exp = c.wait_done(exp_id, timeout=150)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (after,) = c.trials(exp_id)
    assert after["restarts"] == 1
    logs = c.logs(trial["id"])
    assert "resumed from" in logs
    rows = {i["id"]: i for i in c.instances()}
    assert len(rows) == 2, rows
    assert rows[first["id"]]["state"] == "TERMINATED"
    (second,) = [i for i in rows.values() if i["id"] != first["id"]]
    assert second["registeredAt"] is not None
    assert "started (pid" in c.twin.agent(second["id"]).log_text()  # the restarted trial ran there
    assert c.proxy.count("RunInstances") == 2


# -- 6. spot interruption notice ----------------------------------------------------------------------


def test_a_spot_interruption_notice_checkpoints_and_moves_the_trial_to_a_replacement(cloud) -> None:
    c = cloud(provider={"spot": True})
    exp_id = c.create(steps_config(steps=60, delay=0.15, ckpt_every=3))
    trial = c.running_trial(exp_id, 4)
    (first,) = c.live()
    assert first["spot"] is True
    c.twin.interrupt(first["id"])

    def replacement() -> dict | None:
        others = [i for i in c.live() if i["id"] != first["id"]]
        return others[0] if others else None

    second = wait_for(replacement, 60, what="a replacement instance")
    assert c.moto_state(first["id"]) == "running"  # asked for while the interrupted one is still there
    assert second["spot"] is True
    rows = {i["id"]: i for i in c.instances()}
    assert rows[first["id"]]["interruptedAt"] is not None
    # the cloud reclaims the interrupted instance when its two minutes are up
    wait_for(lambda: "resumed from" in c.logs(trial["id"]), 60, what="the trial to resume on the replacement")
    c.twin.terminate(first["id"])

    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    (after,) = c.trials(exp_id)
    assert after["restarts"] == 0  # a preemption, not a failure
    logs = c.logs(trial["id"])
    assert "preempted at step" in logs
    assert "resumed from" in logs
    assert c.proxy.count("RequestSpotInstances") == 2
    assert c.proxy.count("RunInstances") == 0
    assert "started (pid" in c.twin.agent(second["id"]).log_text()  # the trial's second run was there


# -- 7. restart safety ------------------------------------------------------------------------------------


def test_a_master_killed_while_its_instance_runs_adopts_it_and_launches_nothing_twice(cloud) -> None:
    c = cloud(config={"agent_reconnect_wait": "30s"})
    exp_id = c.create(steps_config(steps=50, delay=0.1, ckpt_every=10))
    c.running_trial(exp_id, 5)
    (before,) = c.live()
    assert before["state"] == "RUNNING"
    c.master.signal(signal.SIGKILL)
    c.master.proc.wait(5)
    c.master.start()
    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    after = c.instances()
    assert [i["id"] for i in after] == [before["id"]]  # the same row: no second instance
    assert after[0]["launchedAt"] == before["launchedAt"]
    assert c.trials(exp_id)[0]["restarts"] == 0
    assert c.proxy.count("RunInstances") == 1


def test_a_master_killed_while_its_instance_starts_adopts_it_and_ends_it_when_it_never_registers(cloud) -> None:
    starting = 30.0  # the restarted master passes once before this: ~14 s after the launch on a loaded CI box
    c = cloud(provider={"max_agent_starting_period": f"{starting:g}s"})
    c.twin.skip_next(1)  # the first instance boots, but its agent never starts
    exp_id = c.create(steps_config(steps=5))
    (first,) = wait_for(c.live, 30, what="an instance to be launched")
    assert first["state"] == "STARTING"
    c.master.signal(signal.SIGKILL)
    c.master.proc.wait(5)
    restarted = time.monotonic()
    c.master.start()
    # the first pass of the new master found the instance and kept its row; no second launch
    wait_for(lambda: c.pool()["provisioning"]["lastDecisionAt"] is not None, 30, what="a provisioner pass")
    rows = c.instances()
    assert [(i["id"], i["state"]) for i in rows] == [(first["id"], "STARTING")], c.explain()
    assert c.proxy.count("RunInstances") == 1
    assert c.proxy.count("RunInstances", since=restarted) == 0

    gone = wait_for(
        lambda: [i for i in c.instances() if i["state"] == "TERMINATED"],
        60,
        what="the instance that never registered to be terminated",
    )
    assert gone[0]["id"] == first["id"]
    assert f"did not register an agent within {starting:g}s" in gone[0]["terminationReason"]
    exp = c.wait_done(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.explain()
    assert c.moto_state(first["id"]) in ("shutting-down", "terminated")
    rows = c.instances()
    assert len(rows) == 2 and rows[1]["registeredAt"] is not None
    assert c.proxy.count("RunInstances") == 2
