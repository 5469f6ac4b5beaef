"""An active experiment's state as Determined 0.38.1 reports it (QUEUED, STARTING, RUNNING), derived
from its trials' allocations on read: GET, the listing and its state filter agree, in a bounded
number of queries per page."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event

from pedl.master.lifecycle.states import RUN_PROGRESS, reported_experiment_state
from pedl.master.lifecycle.states import AllocationState as A
from pedl.master.lifecycle.states import ExperimentState as E
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, post


def state(client: TestClient, headers: dict, exp_id: int) -> str:
    return client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()["experiment"]["state"]


def listed(client: TestClient, headers: dict, *states: str) -> dict[int, str]:
    query = "&".join(f"states={s}" for s in states)
    page = client.get(f"/api/v1/experiments?{query}", headers=headers).json()
    return {e["id"]: e["state"] for e in page["experiments"]}


def test_the_reported_state_is_the_furthest_allocation_of_an_active_experiment() -> None:
    assert reported_experiment_state(E.ACTIVE, None) == "STATE_ACTIVE"  # no live allocation (between trials)
    assert reported_experiment_state(E.ACTIVE, RUN_PROGRESS[A.PENDING]) == "STATE_QUEUED"
    assert reported_experiment_state(E.ACTIVE, RUN_PROGRESS[A.ASSIGNED]) == "STATE_STARTING"
    assert reported_experiment_state(E.ACTIVE, RUN_PROGRESS[A.RUNNING]) == "STATE_RUNNING"
    assert reported_experiment_state(E.ACTIVE, RUN_PROGRESS[A.TERMINATING]) == "STATE_RUNNING"
    for stored in set(E) - {E.ACTIVE}:  # every other state is reported as stored
        assert reported_experiment_state(stored, RUN_PROGRESS[A.RUNNING]) == stored


def test_queued_starting_running_then_completed(app: FastAPI, client: TestClient, user: dict) -> None:
    exp_id = create_experiment(client, user, SINGLE_CONFIG)["id"]
    assert state(client, user, exp_id) == "STATE_QUEUED"  # no agent yet
    agent = FakeAgent(app, "agent-1", slots=1)
    app.state.ctx.controller.tick()  # placed: the start is sent, the process has not started
    (start,) = [m for m in agent.messages() if m["type"] == "start_task"]
    assert state(client, user, exp_id) == "STATE_STARTING"
    agent.ctx.controller.task_started(agent.agent_id, start["allocation_id"])
    assert state(client, user, exp_id) == "STATE_RUNNING"
    assert listed(client, user) == {exp_id: "STATE_RUNNING"}
    agent.exit(start["allocation_id"], 0)
    assert state(client, user, exp_id) == "STATE_COMPLETED"
    agent.close()


def test_pause_and_activate_of_an_experiment_no_agent_can_hold(client: TestClient, user: dict) -> None:
    # e2e test_pause_of_experiment_without_trials: slots_per_trial 1000 waits forever
    config = SINGLE_CONFIG + "resources:\n  slots_per_trial: 1000\n"
    exp_id = create_experiment(client, user, config)["id"]
    assert state(client, user, exp_id) == "STATE_QUEUED"
    assert post(client, f"/api/v1/experiments/{exp_id}/pause", None, user).status_code == 200
    assert state(client, user, exp_id) == "STATE_PAUSED"
    assert post(client, f"/api/v1/experiments/{exp_id}/activate", None, user).status_code == 200
    assert state(client, user, exp_id) == "STATE_QUEUED"
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, user).status_code == 200
    assert state(client, user, exp_id) == "STATE_CANCELED"


def test_the_state_filter_takes_substates_and_active_takes_them_all(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    running = create_experiment(client, user, SINGLE_CONFIG)["id"]
    agent.start_all()
    queued = create_experiment(client, user, SINGLE_CONFIG)["id"]  # the one slot is taken
    paused = create_experiment(client, user, SINGLE_CONFIG, activate=False)["id"]
    assert listed(client, user) == {running: "STATE_RUNNING", queued: "STATE_QUEUED", paused: "STATE_PAUSED"}
    assert listed(client, user, "STATE_RUNNING") == {running: "STATE_RUNNING"}
    assert listed(client, user, "STATE_QUEUED") == {queued: "STATE_QUEUED"}
    assert listed(client, user, "STATE_STARTING", "STATE_PULLING") == {}
    assert listed(client, user, "STATE_QUEUED", "STATE_PAUSED") == {queued: "STATE_QUEUED", paused: "STATE_PAUSED"}
    assert listed(client, user, "STATE_ACTIVE") == {running: "STATE_RUNNING", queued: "STATE_QUEUED"}
    total = client.get("/api/v1/experiments?states=STATE_RUNNING", headers=user).json()["pagination"]["total"]
    assert total == 1


def test_a_page_reads_the_states_in_one_grouped_query(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent
) -> None:
    for _ in range(6):
        create_experiment(client, user, SINGLE_CONFIG)
    agent.start_all()
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(" ".join(statement.split()).lower())

    engine = app.state.ctx.db.read_engine  # the listing's
    event.listen(engine, "before_cursor_execute", seen)
    try:
        states = listed(client, user)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert sorted(states.values()) == ["STATE_QUEUED"] * 5 + ["STATE_RUNNING"]
    # one query for the page, whatever its length (the master's own loop reads allocations beside it)
    grouped = [q for q in statements if "from allocations join trials" in q and "group by trials.experiment_id" in q]
    assert len(grouped) == 1, statements
