"""Yielding to new work on the local provider, with real master, agent and trial processes: a long
trial runs on the pool's only instance; new work arrives, an instance boots for it, and the long trial
checkpoints and gives the new work its slot; the new work runs on the first instance while the other
boots, the long trial resumes there from its checkpoint, and every one of its steps is reported once."""

from __future__ import annotations

from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS
from tests.e2e.test_consolidation_e2e import held, running_on, timeline, training_steps, trial_of

pytestmark = pytest.mark.e2e

MOVES = {
    "min_trial_runtime_between_moves": "3s",
    "checkpoint_cost": "1s",
    "restore_cost": "1s",
    "min_remaining_to_yield": "10s",
}
STEPS = 300  # the held trial: 2.5 steps/s until the test releases it (at least 120 s to go)


def pool() -> dict:
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "max_instances": 3,
        "price_per_hour": 1.0,
        "boot_delay": "8s",
        "max_idle_agent_period": "10m",
        "consolidation": MOVES,
    }
    return {"resource_pools": [{"pool_name": "default", "provider": provider}]}


def test_a_long_trial_yields_its_slot_to_new_work_and_resumes_on_the_booting_instance(
    make_cluster, enterable_tmp: Path
) -> None:
    c = make_cluster(pool())
    release = enterable_tmp / "release"  # the trials, run as their user's own uid, look for it
    a = c.create(held("a", release), MODELS / "held")
    first = wait_for(lambda: running_on(c, a), 120, what="the long trial running")
    a_trial = trial_of(c, a)["id"]
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/trials/{a_trial}/checkpoints")["checkpoints"],
        60,
        what="the long trial's first checkpoint",
    )
    n = c.create(held("n", release), MODELS / "held")  # new work that outlasts the boot

    def yielded() -> dict | None:
        moves = c.master.api("GET", "/api/v1/resource-pools/default")["resourcePool"]["moves"]
        return next((m for m in moves if m["trialId"] == a_trial), None)

    move = wait_for(yielded, 60, what="the long trial yielding")
    assert move["from"] == [first] and move["reason"].startswith(f"yielded its slots on instance {first} to new work")
    # the new work runs where the long trial was, while the other instance boots; the long trial
    # resumes on the instance that booted for the new work, from its checkpoint
    assert wait_for(lambda: running_on(c, n), 60, what="the new work running") == first
    second = wait_for(
        lambda: (on := running_on(c, a)) not in (None, first) and on,
        120,
        what="the long trial running on the booted instance",
    )
    release.touch()
    for exp_id in (n, a):
        assert (
            wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)["state"]
            == "STATE_COMPLETED"
        )
    (n_run,) = timeline(c, trial_of(c, n)["id"])
    assert [p["agentId"] for p in n_run["places"]] == [first]
    first_run, second_run = timeline(c, a_trial)
    assert first_run["moved"] == move["reason"] and first_run["preempted"] and first_run["exitCode"] == 0
    assert [p["agentId"] for p in second_run["places"]] == [second]
    assert trial_of(c, a)["restarts"] == 0  # a yield is no failure
    logs = c.logs(a_trial)
    assert "preempted at step" in logs and "resumed from" in logs
    assert training_steps(c, a_trial) == list(range(1, STEPS + 1))  # every step once, none lost, none twice
