"""Bounded trial creation: searchers asking for more trials than
limits.max_trials_per_experiment are refused at create, and trials are created as the pool has room
for them (its capacity in trials, max_concurrent_trials), topped up when room grows."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.config.provider_config import AWSProviderConfig, LocalProviderConfig
from pedl.master.lifecycle import progression as experiment_progression
from pedl.master.lifecycle import trial_room
from tests.master.fakes import FakeAgent, bearer, ctx_of, file_entry, login, post

TOP_UP = experiment_progression.top_up

RANDOM = """\
name: random-exp
entrypoint: python train.py
searcher: {{name: random, metric: loss, max_length: 10, max_trials: {max_trials}{extra}}}
resources: {{slots_per_trial: {slots}}}
hyperparameters:
  lr: {{type: double, minval: 0.001, maxval: 0.1}}
"""


def random_config(max_trials: int, *, slots: int = 1, max_concurrent: int = 0) -> str:
    extra = f", max_concurrent_trials: {max_concurrent}" if max_concurrent else ""
    return RANDOM.format(max_trials=max_trials, slots=slots, extra=extra)


def grid_config(*counts: int, nested: bool = False) -> str:
    lines = [f"  h{i}: {{type: int, minval: 0, maxval: 1000000000000, count: {n}}}" for i, n in enumerate(counts)]
    if nested:  # the same axes inside groups: a grid's size counts nested hyperparameters too
        lines = ["  group:", "    inner:"] + ["    " + line for line in lines]
    return (
        "name: grid-exp\nentrypoint: python train.py\nsearcher: {name: grid, metric: loss, max_length: 10}\n"
        "hyperparameters:\n" + "\n".join(lines) + "\n"
    )


def asha_config(max_trials: int) -> str:
    return (
        "entrypoint: python train.py\nsearcher: {name: adaptive_asha, metric: loss, max_length: 64, "
        f"max_trials: {max_trials}}}\nhyperparameters:\n  lr: {{type: double, minval: 0.001, maxval: 0.1}}\n"
    )


def create(client: TestClient, headers: dict, config: str, *, validate_only: bool = False, activate: bool = True):
    body = {
        "activate": activate,
        "config": config,
        "modelDefinition": [file_entry("train.py", b"pass\n")],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": validate_only,
    }
    return post(client, "/api/v1/experiments", body, headers)


def created(client: TestClient, headers: dict, config: str) -> int:
    r = create(client, headers, config)
    assert r.status_code == 200, r.text
    return r.json()["experiment"]["id"]


def trial_count(client: TestClient, headers: dict, exp_id: int) -> int:
    r = client.get(f"/api/v1/experiments/{exp_id}/trials?limit=1", headers=headers)
    assert r.status_code == 200, r.text
    return r.json()["pagination"]["total"]


def experiment_count(client: TestClient, headers: dict) -> int:
    return client.get("/api/v1/experiments", headers=headers).json()["pagination"]["total"]


def live_trials(client: TestClient, headers: dict, exp_id: int) -> list[dict]:
    trials = client.get(f"/api/v1/experiments/{exp_id}/trials?limit=0", headers=headers).json()["trials"]
    return [t for t in trials if t["state"] not in ("STATE_COMPLETED", "STATE_CANCELED", "STATE_ERROR")]


@pytest.fixture
def master_config(master_config: MasterConfig) -> MasterConfig:
    """No floor on live trials: an empty static pool has room for exactly one waiting trial."""
    limits = master_config.limits.model_copy(update={"min_live_trials_per_experiment": 1})
    return master_config.model_copy(update={"limits": limits})


# -- refused at create -----------------------------------------------------------------------------


def assert_refused(r, field: str) -> None:
    assert r.status_code == 400, r.text
    body = r.json()
    assert [f["field"] for f in body["fields"]] == [field]
    assert field in body["message"]
    assert "10,000" in body["message"]  # the limit, so the user knows what is allowed


# (100,000,000, the reported case, is left to the searcher's tests: before the fix it never returned)
@pytest.mark.parametrize("max_trials", [10_001, 20_000])
def test_random_max_trials_above_the_limit_is_400(client: TestClient, user: dict, max_trials: int) -> None:
    assert_refused(create(client, user, random_config(max_trials)), "searcher.max_trials")
    assert_refused(create(client, user, random_config(max_trials), validate_only=True), "searcher.max_trials")
    assert experiment_count(client, user) == 0


def test_adaptive_asha_max_trials_above_the_limit_is_400(client: TestClient, user: dict) -> None:
    assert_refused(create(client, user, asha_config(100_000_000)), "searcher.max_trials")
    assert experiment_count(client, user) == 0


@pytest.mark.parametrize("counts,nested", [((200, 200), False), ((101, 100), True), ((10_001,), False)])
def test_grid_larger_than_the_limit_is_400(client: TestClient, user: dict, counts: tuple, nested: bool) -> None:
    assert_refused(create(client, user, grid_config(*counts, nested=nested)), "hyperparameters")
    assert experiment_count(client, user) == 0


def test_limit_is_read_from_master_yaml(master_config: MasterConfig) -> None:
    limits = master_config.limits.model_copy(update={"max_trials_per_experiment": 5})
    with TestClient(_app(master_config.model_copy(update={"limits": limits}))) as client:
        user = bearer(login(client, "determined"))
        r = create(client, user, random_config(6))
        assert r.status_code == 400 and "at most 5 trials" in r.json()["message"]
        assert create(client, user, random_config(5)).status_code == 200
        r = create(client, user, grid_config(2, 3))
        assert r.status_code == 400 and r.json()["fields"][0]["field"] == "hyperparameters"


def _app(config: MasterConfig) -> FastAPI:
    from pedl.clock import ManualClock
    from pedl.master.app import create_app

    return create_app(config, clock=ManualClock())


# -- created as the pool has room --------------------------------------------------------------------


def test_max_trials_at_the_limit_creates_one_waiting_trial_on_an_empty_pool(client: TestClient, user: dict) -> None:
    exp_id = created(client, user, random_config(10_000))
    assert trial_count(client, user, exp_id) == 1
    r = client.get(f"/api/v1/experiments/{exp_id}", headers=user)
    assert r.json()["experiment"]["progress"] == 0  # of 10,000 trials, not of the one created


def test_a_large_grid_creates_only_what_the_pool_holds(client: TestClient, user: dict, agent: FakeAgent) -> None:
    exp_id = created(client, user, grid_config(100, 100))  # 10,000 points, at the limit
    assert trial_count(client, user, exp_id) == 1  # the agent has one slot


def test_trials_fill_the_registered_slots(app: FastAPI, client: TestClient, user: dict) -> None:
    agents = [FakeAgent(app, "a-4", slots=4), FakeAgent(app, "a-2", slots=2)]
    try:
        assert trial_count(client, user, created(client, user, random_config(50))) == 6
        assert trial_count(client, user, created(client, user, random_config(50, slots=2))) == 3
        assert trial_count(client, user, created(client, user, random_config(50, slots=4))) == 1
        assert trial_count(client, user, created(client, user, random_config(50, slots=0))) == 6  # counts one slot
        assert trial_count(client, user, created(client, user, random_config(50, max_concurrent=2))) == 2
        assert trial_count(client, user, created(client, user, random_config(3))) == 3
    finally:
        for a in agents:
            a.close()


def test_a_registering_agent_tops_experiments_up(app: FastAPI, client: TestClient, user: dict) -> None:
    exp_id = created(client, user, random_config(20))
    paused = create(client, user, random_config(20), activate=False).json()["experiment"]["id"]
    assert trial_count(client, user, exp_id) == 1
    agent = FakeAgent(app, "agent-9", slots=4)
    try:
        started = agent.start_all()  # the controller's pass creates the trials that now have room
        assert trial_count(client, user, exp_id) == 4
        assert trial_count(client, user, paused) == 1  # paused experiments are left as they are
        assert len(started) == 4
        agent.exit(started[0].allocation_id, 0)  # a trial completes: one more takes its place
        assert trial_count(client, user, exp_id) == 5
        assert len(live_trials(client, user, exp_id)) == 4
        r = client.get(f"/api/v1/experiments/{exp_id}", headers=user)
        assert r.json()["experiment"]["progress"] == pytest.approx(1 / 20)
    finally:
        agent.close()


def test_top_up_looks_only_at_active_experiments_that_may_create_more(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    agent = FakeAgent(app, "a-4", slots=4)
    try:
        wanting = created(client, user, random_config(50, slots=2))
        done = created(client, user, random_config(3))  # all three created: the searcher is exhausted
        paused = create(client, user, random_config(50), activate=False).json()["experiment"]["id"]
        rows = ctx_of(app).controller.run(experiment_progression.top_up_candidates)
        assert rows == [(wanting, "default", 2, 0)]
        assert {done, paused}.isdisjoint(r[0] for r in rows)
    finally:
        agent.close()


def test_creation_is_batched_per_request_and_per_pass(
    app: FastAPI, client: TestClient, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    ctl = ctx_of(app).controller
    # the master's own control loop runs in the background: keep its top-up passes out, run ours
    monkeypatch.setattr(experiment_progression, "top_up", lambda _fx, _s, _saturated: None)
    agent = FakeAgent(app, "big", slots=250)
    try:
        exp_id = created(client, user, random_config(1000))
        assert trial_count(client, user, exp_id) == trial_room.TRIALS_PER_PASS
        ctl.run(lambda s: TOP_UP(ctl, s, ctl.saturated_experiments))
        assert trial_count(client, user, exp_id) == 2 * trial_room.TRIALS_PER_PASS
        ctl.run(lambda s: TOP_UP(ctl, s, ctl.saturated_experiments))
        ctl.run(lambda s: TOP_UP(ctl, s, ctl.saturated_experiments))
        assert trial_count(client, user, exp_id) == 250
    finally:
        agent.close()


def test_an_experiment_runs_to_the_end_a_few_trials_at_a_time(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    exp_id = created(client, user, random_config(5))
    for _ in range(5):
        [task] = agent.start_all()
        agent.exit(task.allocation_id, 0)
    assert trial_count(client, user, exp_id) == 5
    r = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
    assert r["state"] == "STATE_COMPLETED"
    assert r["progress"] == 1


# -- pool capacity in slots (pure) ---------------------------------------------------------------------


def test_pool_slots_of_a_provider_is_max_instances_of_the_largest_type() -> None:
    aws = AWSProviderConfig(
        type="aws",
        image_id="ami-1",
        ssh_key_name="k",
        max_instances=3,
        instance_type=["p3.2xlarge", "p3.16xlarge", "p3.8xlarge"],
    )
    assert trial_room.pool_slots(ResourcePoolConfig(pool_name="gpu", provider=aws), registered_slots=0) == 3 * 8
    local = LocalProviderConfig(type="local", max_instances=5, slots_per_instance=2)
    assert trial_room.pool_slots(ResourcePoolConfig(pool_name="l", provider=local), registered_slots=99) == 10
    assert trial_room.pool_slots(ResourcePoolConfig(pool_name="static"), registered_slots=7) == 7


def test_capacity_in_trials() -> None:
    assert trial_room.capacity_in_trials(24, 8, floor=1) == 3
    assert trial_room.capacity_in_trials(24, 16, floor=1) == 1  # a gang over instances
    assert trial_room.capacity_in_trials(8, 0, floor=1) == 8  # a zero-slot trial counts one slot
    assert trial_room.capacity_in_trials(0, 1, floor=1) == 1  # one trial waits on an empty pool
    assert trial_room.capacity_in_trials(4, 8, floor=1) == 1  # bigger than the pool: it waits (or fails)
    assert trial_room.capacity_in_trials(2, 1, floor=16) == 16


def test_by_default_a_few_trials_wait_even_on_an_empty_pool(master_config: MasterConfig) -> None:
    """limits.min_live_trials_per_experiment (16, Determined's default max_concurrent_trials)."""
    limits = master_config.limits.model_copy(update={"min_live_trials_per_experiment": 16})
    with TestClient(_app(master_config.model_copy(update={"limits": limits}))) as client:
        user = bearer(login(client, "determined"))
        assert trial_count(client, user, created(client, user, random_config(10_000))) == 16
        assert trial_count(client, user, created(client, user, random_config(5))) == 5
