"""Consolidation and spot first on AWS APIs, on real processes: the master's `aws` provider talks to
moto through the EC2 fault proxy and the cloud twin runs a real agent on each tagged instance
(tests/e2e/aws_cluster.py). Two scenarios, as on the local provider (test_consolidation_e2e.py):
two trials each alone on a half-empty 2-slot instance, one moves and the drained instance is
terminated in moto; and a spot pool whose spot capacity comes back, whose trial moves from its
on-demand fallback to a new spot instance, the fallback then terminated in moto. In both every
training step is reported once, and a move is no restart."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.devcluster import wait_for
from tests.e2e.aws_cluster import (  # noqa: F401 - the fixtures
    INSTANCE_TYPE,
    TAG_KEY,
    TAG_VALUE,
    AWSCluster,
    cloud_fixture,
    moto_url_fixture,
)
from tests.e2e.conftest import MODELS, steps_config
from tests.e2e.test_consolidation_e2e import MOVES, running_on, timeline, training_steps, trial_of

pytestmark = pytest.mark.e2e

TWO_SLOTS = "m5.large"  # no GPU, 2 vCPUs: 2 slots, for the provider and the twin's agents alike
GONE = ("shutting-down", "terminated")
RETRY = 3.0  # capacity_retry_period: spot is asked for again this long after a capacity error
# trials are held (a step per `delay`) until the test releases them, then run at full speed: the
# steps left after the release are what the test waits for, so there are no more than the scenario
# needs. 60 s held covers a move; a spot replacement pays only for a trial expected to run on well
# past its boot (the planner assumes 90 s), so that one is held for 120 s.
STEPS = 150
DELAY_MOVE, DELAY_SPOT = 0.4, 0.8


def held(name: str, release: Path, delay: float) -> dict:
    return steps_config(name, steps=STEPS, delay=delay, ckpt_every=2, release=str(release))


def moves(c: AWSCluster) -> list[dict]:
    return c.pool()["moves"]


def row(c: AWSCluster, inst_id: str) -> dict:
    (found,) = [i for i in c.instances() if i["id"] == inst_id]
    return found


def drained_in_moto(c: AWSCluster, inst_id: str) -> None:
    """Wait until the instance is gone in moto (and its agent with it), ended by the master for a drain."""
    wait_for(lambda: c.moto_state(inst_id) in GONE, 60, what=f"instance {inst_id} terminated in moto")
    wait_for(lambda: not c.twin.agent(inst_id).alive(), 30, what=f"the twin to kill {inst_id}'s agent")
    reason = row(c, inst_id)["terminationReason"]
    assert reason.startswith("drained: its trial(s) fit elsewhere: saves $"), (reason, c.explain())


def complete_once_each(c: AWSCluster, *exp_ids: int) -> None:
    """Each experiment completes, its trial never restarted, every training step reported once."""
    for exp_id in exp_ids:
        assert c.wait_done(exp_id)["state"] == "STATE_COMPLETED", c.explain()
        trial = trial_of(c, exp_id)
        assert trial["restarts"] == 0  # a move is no failure
        assert training_steps(c, trial["id"]) == list(range(1, STEPS + 1))


def terminated_row(c: AWSCluster, inst_id: str) -> dict:
    """The master's row once a pass saw the instance gone from the cloud."""
    return wait_for(
        lambda: (r := row(c, inst_id))["state"] == "TERMINATED" and r, 30, what=f"instance {inst_id}'s row TERMINATED"
    )


def test_a_half_empty_instance_drains_its_trial_moves_and_the_instance_is_terminated_in_moto(
    cloud, enterable_tmp: Path
) -> None:
    c = cloud(
        provider={
            "instance_type": TWO_SLOTS,
            "cpu_slots_allowed": True,
            "max_instances": 3,
            "instance_type_prices": {TWO_SLOTS: 1.0},
            "consolidation": MOVES,
        }
    )
    release = enterable_tmp / "release"  # the trials, run as their user, look for it
    # three trials on two 2-slot instances launched together: two share one, the third is alone
    exps = [c.create(held(name, release, DELAY_MOVE), MODELS / "held") for name in ("a", "b", "x")]
    on = wait_for(
        lambda: (p := {e: running_on(c, e) for e in exps}) and None not in p.values() and p,
        120,
        what="three trials running",
    )
    assert len(set(on.values())) == 2, on
    launched = c.proxy.count("RunInstances")
    x = next(e for e in exps if list(on.values()).count(on[e]) == 2)  # one of the two that share
    a, b = (e for e in exps if e != x)
    first, second = on[a], on[b]
    assert first != second
    # x ends: a and b are each alone on a half-empty instance, and one of them moves to the other
    c.master.api("POST", f"/api/v1/experiments/{x}/kill")
    assert c.wait_done(x, timeout=60)["state"] == "STATE_CANCELED"

    (move,) = wait_for(lambda: moves(c), 60, what="a trial moved")
    ids = {trial_of(c, e)["id"]: e for e in (a, b)}
    assert move["trialId"] in ids
    moved = ids[move["trialId"]]
    stayed = b if moved == a else a
    source, target = on[moved], on[stayed]
    assert (move["from"], move["to"]) == ([source], [target])
    assert move["reason"].startswith(f"moved from instance {source} to {target} to save $")
    assert move["savingPerHour"] > 0
    # it checkpoints, leaves and runs again from its checkpoint beside the other; the drained instance ends
    wait_for(lambda: running_on(c, moved) == target, 60, what="the moved trial running on the other instance")
    assert running_on(c, stayed) == target
    drained_in_moto(c, source)
    assert c.moto_state(target) == "running" and row(c, target)["state"] == "RUNNING"

    release.touch()
    complete_once_each(c, a, b)
    # no instance was launched for the move
    assert {i["id"] for i in c.instances()} == {source, target}
    assert c.proxy.count("RunInstances") == launched
    first_run, second_run = timeline(c, move["trialId"])
    assert (first_run["moved"], second_run["moved"]) == (move["reason"], None)
    assert [p["agentId"] for p in first_run["places"]] == [source]
    assert [p["agentId"] for p in second_run["places"]] == [target]
    assert "resumed from" in c.logs(move["trialId"])
    assert terminated_row(c, source)["terminationReason"].startswith("drained: ")


def test_spot_capacity_back_moves_the_trial_off_its_on_demand_fallback_which_is_terminated_in_moto(
    cloud, enterable_tmp: Path
) -> None:
    # the replacement waits empty while the trial checkpoints and leaves: the decider does not know it is
    # claimed by a move, so a 3 s idle period could end it first
    c = cloud(
        provider={
            "spot": True,
            "capacity_retry_period": f"{RETRY:g}s",
            "consolidation": MOVES,
            "instance_type_prices": {INSTANCE_TYPE: {"on_demand": 1.0, "spot": 0.1}},
            "max_idle_agent_period": "30s",
        }
    )
    c.proxy.fail(
        "RequestSpotInstances",
        "InsufficientInstanceCapacity",
        f"We currently do not have sufficient {INSTANCE_TYPE} capacity in the Availability Zone you "
        "requested (us-east-1a).",
    )
    release = enterable_tmp / "release"  # the trials, run as their user, look for it
    exp_id = c.create(held("spot-back", release, DELAY_SPOT), MODELS / "held")
    # no spot capacity: the pool falls back to on-demand, and the trial runs and checkpoints there
    fallback = wait_for(lambda: running_on(c, exp_id), 60, what="the trial running on the fallback")
    assert row(c, fallback)["spot"] is False
    assert c.moto_instance(fallback).get("InstanceLifecycle") != "spot"
    wait_for(lambda: trial_of(c, exp_id)["latestCheckpointUuid"], 30, what="the trial's first checkpoint")
    assert c.proxy.failed("RequestSpotInstances") >= 1

    c.proxy.clear("RequestSpotInstances")
    # once spot may be tried again, a spot replacement is launched and the trial moves to it
    (move,) = wait_for(lambda: moves(c), 90, what="the trial moved to spot")
    (spot_id,) = move["to"]
    assert move["from"] == [fallback]
    assert move["reason"].startswith(f"moved from instance {fallback} to {spot_id} to save $")
    spot = row(c, spot_id)
    assert spot["spot"] is True and spot["instanceType"] == INSTANCE_TYPE
    assert c.moto_instance(spot_id).get("InstanceLifecycle") == "spot"
    assert c.moto_tags(spot_id)[TAG_KEY] == TAG_VALUE
    wait_for(lambda: running_on(c, exp_id) == spot_id, 60, what="the trial running on the spot instance")
    drained_in_moto(c, fallback)
    said = [e["message"] for e in c.pool()["recentEvents"]]
    assert any(m.startswith(f"a spot replacement for on-demand instance {fallback}: saves $") for m in said), said
    # spot was asked for again only once the retry period was over, and launched once; on-demand once
    failed = [call.t for call in c.proxy.calls("RequestSpotInstances") if call.error]
    (asked,) = [call.t for call in c.proxy.calls("RequestSpotInstances") if not call.error]
    assert asked - max(failed) >= RETRY - 0.5, c.explain()  # 0.5: the master's clock against the proxy's
    assert c.proxy.count("RunInstances") == 1

    release.touch()
    complete_once_each(c, exp_id)
    first_run, second_run = timeline(c, move["trialId"])
    assert (first_run["moved"], second_run["moved"]) == (move["reason"], None)
    assert [p["agentId"] for p in first_run["places"]] == [fallback]
    assert [p["agentId"] for p in second_run["places"]] == [spot_id]
