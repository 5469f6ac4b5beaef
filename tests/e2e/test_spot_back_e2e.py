"""Spot back on the local provider, with real master, agent and trial processes: a spot pool finds no
spot capacity (the local spot market's file says so), falls back to an on-demand instance and the
trial runs there; once spot capacity is back, the provisioner launches a spot replacement, the trial
checkpoints, leaves and is placed again from its checkpoint on spot, the on-demand fallback ends, and
the trial completes with every training step reported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS, Cluster, steps_config
from tests.e2e.test_consolidation_e2e import instances, running_on, timeline, training_steps, trial_of

pytestmark = pytest.mark.e2e

# held at 2.5 steps/s until the test releases it, then at full speed; long enough that a spot
# replacement pays for its boot (the planner expects 90 s) and the move
STEPS = 600
RETRY = 3  # seconds spot is avoided after a capacity error: then it is tried again
ON_DEMAND, SPOT = 1.0, 0.2  # USD/h: the move saves $0.80/h
NO_CAPACITY = "(InsufficientInstanceCapacity)"
MOVES = {
    "keep_free_slots": 0,
    "min_saving_per_hour": 0.1,
    "min_trial_runtime_between_moves": "3s",
    "checkpoint_cost": "1s",
    "restore_cost": "1s",
}


def pool() -> dict:
    provider = {
        "type": "local",
        "spot": True,
        "slots_per_instance": 1,
        "max_instances": 2,
        "price_per_hour": ON_DEMAND,
        "spot_price_per_hour": SPOT,
        "capacity_retry_period": f"{RETRY}s",
        "max_idle_agent_period": "10m",
        "consolidation": MOVES,
    }
    return {"resource_pools": [{"pool_name": "default", "provider": provider}]}


def spot_market(c: Cluster, word: str) -> None:
    """The local provider's spot market: its file in the master's data directory."""
    path = c.master.data_dir / "local-instances" / "spot-capacity"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(word + "\n")


def pool_state(c: Cluster) -> dict:
    return c.master.api("GET", "/api/v1/resource-pools/default")["resourcePool"]


def pool_events(c: Cluster) -> list[str]:
    return [e["message"] for e in pool_state(c)["recentEvents"]]


def test_a_trial_on_an_on_demand_fallback_moves_to_spot_once_spot_is_back(make_cluster, enterable_tmp: Path) -> None:
    c = make_cluster(pool())
    spot_market(c, "unavailable")
    release = enterable_tmp / "release"  # the trials, run as their user, look for it
    exp = c.create(
        steps_config("spot-back", steps=STEPS, delay=0.4, ckpt_every=5, release=str(release)), MODELS / "held"
    )
    # no spot capacity: the spot launch fails and the pool falls back to on demand at once
    fallback = wait_for(lambda: running_on(c, exp), 120, what="the trial running on the fallback")
    assert instances(c)[fallback]["spot"] is False
    assert list(instances(c)) == [fallback]  # the failed spot launch started nothing
    assert any(
        m.startswith("launching 1 x local (spot) failed: capacity: there is no spot capacity")
        and NO_CAPACITY in m
        and m.endswith("trying another option")
        for m in pool_events(c)
    )
    # once spot may be tried again and the trial has checkpointed, it asks for a spot replacement,
    # which fails while the market is closed: the trial stays where it is
    asked = f"a spot replacement for on-demand instance {fallback}: saves $0.80/h once its trial(s) move"
    wait_for(
        lambda: sum(NO_CAPACITY in m for m in pool_events(c)) >= 2 and asked in pool_events(c),
        60,
        what="a spot replacement asked for and refused",
    )
    assert list(instances(c)) == [fallback] and pool_state(c)["moves"] == []
    assert running_on(c, exp) == fallback

    spot_market(c, "available")
    (move,) = wait_for(lambda: pool_state(c)["moves"], 60, what="the trial moved to spot")
    (target,) = move["to"]
    assert set(instances(c)) == {fallback, target}  # one spot replacement, launched once
    assert instances(c)[target]["spot"] is True
    assert move["trialId"] == trial_of(c, exp)["id"] and move["from"] == [fallback]
    assert move["reason"] == f"moved from instance {fallback} to {target} to save $0.80/h"
    assert move["savingPerHour"] == pytest.approx(ON_DEMAND - SPOT)
    # it checkpoints, leaves and runs again from its checkpoint on spot; the fallback ends
    wait_for(lambda: running_on(c, exp) == target, 60, what="the trial running on the spot instance")
    gone = wait_for(
        lambda: instances(c)[fallback]["state"] == "TERMINATED" and instances(c)[fallback],
        60,
        what="the on-demand fallback terminated",
    )
    assert gone["terminationReason"] == "drained: its trial(s) fit elsewhere: saves $0.80/h"
    # it was cordoned (no new work while spot is available) before it drained
    assert gone["cordonedSince"] is not None and gone["drainingSince"] >= gone["cordonedSince"]
    assert instances(c)[target]["state"] == "RUNNING"
    assert set(instances(c)) == {fallback, target}
    assert pool_state(c)["cost"]["perHour"] == pytest.approx(SPOT)

    release.touch()
    assert wait_experiment(c.master, exp, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)["state"] == "STATE_COMPLETED"
    trial = trial_of(c, exp)
    assert trial["restarts"] == 0  # a move is no failure
    first_run, second_run = timeline(c, trial["id"])
    assert (first_run["moved"], second_run["moved"]) == (move["reason"], None)
    assert first_run["preempted"] and first_run["exitCode"] == 0
    assert [p["agentId"] for p in first_run["places"]] == [fallback]
    assert [p["agentId"] for p in second_run["places"]] == [target]
    # it went on from its checkpoint: every step once, none lost, none twice
    logs = c.logs(trial["id"])
    assert "preempted at step" in logs and "resumed from" in logs
    assert training_steps(c, trial["id"]) == list(range(1, STEPS + 1))
