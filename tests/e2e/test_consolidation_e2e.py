"""Consolidation on the local provider, with real master, agent and trial processes: two trials, each
alone on a half-empty 2-slot instance; the provisioner drains one instance, its trial checkpoints,
leaves and is placed again from its checkpoint on the other, the drained instance ends, and both
trials complete with every training step reported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS, Cluster, steps_config

pytestmark = pytest.mark.e2e

MOVES = {
    "keep_free_slots": 0,
    "min_saving_per_hour": 0.1,
    "min_trial_runtime_between_moves": "3s",
    "checkpoint_cost": "1s",
    "restore_cost": "1s",
}
# held at 2.5 steps/s (at least 120 s for all of them) until the test releases them, then at full speed
STEPS = 300


def pool() -> dict:
    provider = {
        "type": "local",
        "slots_per_instance": 2,
        "max_instances": 3,
        "price_per_hour": 1.0,
        "max_idle_agent_period": "10m",
        "consolidation": MOVES,
    }
    return {"resource_pools": [{"pool_name": "default", "provider": provider}]}


def held(name: str, release: Path) -> dict:
    return steps_config(name, steps=STEPS, delay=0.4, ckpt_every=2, release=str(release))


def trial_of(c: Cluster, exp_id: int) -> dict:
    (trial,) = c.trials(exp_id)
    return trial


def timeline(c: Cluster, trial_id: int) -> list[dict]:
    return c.master.api("GET", f"/api/v1/trials/{trial_id}/allocations")["allocations"]


def running_on(c: Cluster, exp_id: int) -> str | None:
    """The instance the trial's latest allocation runs on (its process started), else None."""
    allocs = timeline(c, trial_of(c, exp_id)["id"])
    if not allocs or allocs[-1]["state"] != "STATE_RUNNING":
        return None
    (place,) = allocs[-1]["places"]
    return place["agentId"]


def instances(c: Cluster) -> dict[str, dict]:
    return {i["id"]: i for i in c.master.api("GET", "/api/v1/instances", all="true")["instances"]}


def training_steps(c: Cluster, trial_id: int) -> list[int]:
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    return sorted(m["stepsCompleted"] for m in metrics)


def test_a_half_empty_instance_drains_its_trial_moves_and_the_instance_ends(make_cluster, enterable_tmp: Path) -> None:
    c = make_cluster(pool())
    release = enterable_tmp / "release"  # the trials, run as their user, look for it
    # A and a trial X start together on one instance; B, submitted next, finds it full and gets a second
    a = c.create(held("a", release), MODELS / "held")
    x = c.create(held("x", release), MODELS / "held")

    def together() -> str | None:
        on_a, on_x = running_on(c, a), running_on(c, x)
        return on_a if on_a is not None and on_a == on_x else None

    first = wait_for(together, 120, what="trials a and x running on one instance")
    b = c.create(held("b", release), MODELS / "held")
    second = wait_for(lambda: running_on(c, b), 120, what="trial b running")
    assert second != first
    # X ends: A and B are each alone on a half-empty instance, and one of them moves to the other
    c.master.api("POST", f"/api/v1/experiments/{x}/kill")
    assert wait_experiment(c.master, x, {"STATE_CANCELED", "STATE_ERROR"}, timeout=60)["state"] == "STATE_CANCELED"

    def moves() -> list[dict]:
        return c.master.api("GET", "/api/v1/resource-pools/default")["resourcePool"]["moves"]

    (move,) = wait_for(moves, 60, what="a trial moved")
    ids = {trial_of(c, e)["id"]: e for e in (a, b)}
    assert move["trialId"] in ids
    moved = ids[move["trialId"]]
    stayed = b if moved == a else a
    source, target = (first, second) if moved == a else (second, first)
    assert (move["from"], move["to"]) == ([source], [target])
    assert move["reason"].startswith(f"moved from instance {source} to {target} to save $")
    assert move["savingPerHour"] > 0
    # it checkpoints, leaves and runs again from its checkpoint beside the other; the drained instance ends
    wait_for(lambda: running_on(c, moved) == target, 60, what="the moved trial running on the other instance")
    assert running_on(c, stayed) == target
    gone = wait_for(
        lambda: instances(c)[source]["state"] == "TERMINATED" and instances(c)[source],
        60,
        what="the drained instance terminated",
    )
    assert gone["terminationReason"].startswith("drained: its trial(s) fit elsewhere")
    assert instances(c)[target]["state"] == "RUNNING"
    assert set(instances(c)) == {source, target}  # no instance was launched for the move

    release.touch()
    for exp_id in (a, b):
        assert (
            wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)["state"]
            == "STATE_COMPLETED"
        )
    moved_trial, stayed_trial = trial_of(c, moved), trial_of(c, stayed)
    assert moved_trial["restarts"] == 0 and stayed_trial["restarts"] == 0  # a move is no failure
    # the timeline says why the first allocation ended, and where each ran
    first_run, second_run = timeline(c, moved_trial["id"])
    assert (first_run["moved"], second_run["moved"]) == (move["reason"], None)
    assert first_run["preempted"] and first_run["exitCode"] == 0
    assert [p["agentId"] for p in first_run["places"]] == [source]
    assert [p["agentId"] for p in second_run["places"]] == [target]
    (only_run,) = timeline(c, stayed_trial["id"])
    assert only_run["moved"] is None and [p["agentId"] for p in only_run["places"]] == [target]
    # the moved trial went on from its checkpoint: every step once, none lost, none twice
    logs = c.logs(moved_trial["id"])
    assert "preempted at step" in logs and "resumed from" in logs
    assert training_steps(c, moved_trial["id"]) == list(range(1, STEPS + 1))
    assert training_steps(c, stayed_trial["id"]) == list(range(1, STEPS + 1))
