"""det agent enable / disable [--drain]: admins only; a disabled agent gets no new task; without drain
its running tasks are preempted (checkpoint and queue again), with drain they run on; a reconnect
keeps it disabled; unknown agents are a 404."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.master.db import models
from pedl.master.lifecycle.states import AllocationState
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of, post


def agent_json(client: TestClient, headers: dict, agent_id: str) -> dict:
    agents = client.get("/api/v1/agents", headers=headers).json()["agents"]
    return next(a for a in agents if a["id"] == agent_id)


def allocations(app: FastAPI) -> list[models.Allocation]:
    with ctx_of(app).db.read_session() as s:
        return list(s.scalars(select(models.Allocation).order_by(models.Allocation.id)))


def test_disable_with_drain_lets_tasks_run_and_places_nothing_new(
    app: FastAPI, client: TestClient, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-drain", slots=2)
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        [task] = fake.start_all()
        r = post(client, "/api/v1/agents/agent-drain/disable", {"drain": True}, admin)
        assert r.status_code == 200, r.text
        assert (r.json()["agent"]["enabled"], r.json()["agent"]["draining"]) == (False, True)
        create_experiment(client, user, SINGLE_CONFIG)
        assert fake.start_all() == []  # a free slot, but the agent is disabled
        [running] = [a for a in allocations(app) if a.id == task.allocation_id]
        assert running.state == AllocationState.RUNNING and not running.preempt_requested
        r = post(client, "/api/v1/agents/agent-drain/enable", None, admin)
        assert r.status_code == 200 and r.json()["agent"]["enabled"] is True, r.text
        assert len(fake.start_all()) == 1  # placed once enabled again
    finally:
        fake.close()


def test_disable_without_drain_preempts_its_tasks(app: FastAPI, client: TestClient, admin: dict, user: dict) -> None:
    fake = FakeAgent(app, "agent-off", slots=2)
    try:
        create_experiment(client, user, GRID_CONFIG)  # two trials, both on this agent
        started = fake.start_all()
        assert len(started) == 2
        r = post(client, "/api/v1/agents/agent-off/disable", {}, admin)
        assert r.status_code == 200 and r.json()["agent"]["draining"] is False, r.text
        held = {a.id: a for a in allocations(app)}
        assert all(held[t.allocation_id].preempt_requested for t in started)
        assert agent_json(client, user, "agent-off")["enabled"] is False
    finally:
        fake.close()


def test_a_disabled_agent_stays_disabled_when_it_registers_again(
    app: FastAPI, client: TestClient, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-back", slots=1)
    assert post(client, "/api/v1/agents/agent-back/disable", {"drain": True}, admin).status_code == 200
    fake.close()
    again = FakeAgent(app, "agent-back", slots=1)
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        assert again.start_all() == []
        assert agent_json(client, user, "agent-back")["enabled"] is False
    finally:
        again.close()


def test_only_admins_and_known_agents(app: FastAPI, client: TestClient, admin: dict, user: dict) -> None:
    fake = FakeAgent(app, "agent-guarded", slots=1)
    try:
        r = post(client, "/api/v1/agents/agent-guarded/disable", {}, user)
        assert r.status_code == 403 and "admin" in r.json()["message"], r.text
        assert agent_json(client, user, "agent-guarded")["enabled"] is True
        r = post(client, "/api/v1/agents/nope/disable", {}, admin)
        assert r.status_code == 404 and "nope" in r.json()["message"], r.text
        r = post(client, "/api/v1/agents/agent-guarded/disable", {"drain": "maybe"}, admin)
        assert r.status_code == 400 and "drain" in r.json()["message"], r.text
    finally:
        fake.close()
