"""det slot enable / disable / list: admins only ("forbidden" to others); the scheduler places nothing
on a disabled slot; without drain the task holding it is preempted, with drain it runs on; the flags
outlast a reconnection; the agent and slot read routes show them, a free slot's container as null."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.master.db import models
from pedl.version import DETERMINED_API_VERSION
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of, post


def allocation(app: FastAPI, allocation_id: str) -> models.Allocation:
    with ctx_of(app).db.read_session() as s:
        return s.scalars(select(models.Allocation).where(models.Allocation.id == allocation_id)).one()


def test_a_disabled_slot_gets_no_task_and_the_other_does(
    app: FastAPI, client: TestClient, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-s", slots=2)
    try:
        r = post(client, "/api/v1/agents/agent-s/slots/0/disable", {}, admin)
        assert r.status_code == 200, r.text
        assert r.json()["slot"] == {
            "id": "0",
            "enabled": False,
            "draining": False,
            "container": None,
            "device": {"id": 0, "type": "TYPE_CPU", "brand": "CPU", "uuid": ""},
        }
        create_experiment(client, user, SINGLE_CONFIG)
        create_experiment(client, user, SINGLE_CONFIG)
        [task] = fake.start_all()  # two trials wait, one slot takes work
        [place] = allocation(app, task.allocation_id).assignment
        assert place["slot_ids"] == ["1"]
        r = post(client, "/api/v1/agents/agent-s/slots/0/enable", None, admin)
        assert r.status_code == 200 and r.json()["slot"]["enabled"] is True, r.text
        [second] = fake.start_all()
        assert allocation(app, second.allocation_id).assignment[0]["slot_ids"] == ["0"]
    finally:
        fake.close()


def test_disable_without_drain_preempts_the_slots_task_with_drain_not(
    app: FastAPI, client: TestClient, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-p", slots=1)
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        [task] = fake.start_all()
        r = post(client, "/api/v1/agents/agent-p/slots/0/disable", {"drain": True}, admin)
        assert r.status_code == 200 and r.json()["slot"]["draining"] is True, r.text
        assert r.json()["slot"]["container"]["id"] == task.allocation_id  # it still holds the slot
        assert not allocation(app, task.allocation_id).preempt_requested
        r = post(client, "/api/v1/agents/agent-p/slots/0/disable", {}, admin)
        assert r.status_code == 200 and r.json()["slot"]["draining"] is False, r.text
        assert allocation(app, task.allocation_id).preempt_requested
    finally:
        fake.close()


def test_a_disabled_slot_stays_disabled_when_its_agent_registers_again(
    app: FastAPI, client: TestClient, admin: dict, user: dict
) -> None:
    fake = FakeAgent(app, "agent-r", slots=1)
    assert post(client, "/api/v1/agents/agent-r/slots/0/disable", {}, admin).status_code == 200
    fake.close()
    again = FakeAgent(app, "agent-r", slots=1)
    try:
        create_experiment(client, user, SINGLE_CONFIG)
        assert again.start_all() == []
        r = client.get("/api/v1/agents/agent-r/slots/0", headers=user)
        assert r.status_code == 200 and r.json()["slot"]["enabled"] is False, r.text
    finally:
        again.close()


def test_read_routes_show_determineds_version_and_null_containers(app: FastAPI, client: TestClient, user: dict) -> None:
    fake = FakeAgent(app, "agent-v", slots=2)
    try:
        r = client.get("/api/v1/agents/agent-v", headers=user)
        assert r.status_code == 200, r.text
        agent = r.json()["agent"]
        assert (agent["version"], agent["pedlVersion"]) == (DETERMINED_API_VERSION, "test")  # the fake's pedl
        assert [s["container"] for s in agent["slots"].values()] == [None, None]
        [listed] = client.get("/api/v1/agents", headers=user).json()["agents"]
        assert listed == agent
        r = client.get("/api/v1/agents/agent-v/slots", headers=user)
        assert r.status_code == 200 and [s["id"] for s in r.json()["slots"]] == ["0", "1"], r.text
        create_experiment(client, user, SINGLE_CONFIG)
        [task] = fake.start_all()
        slots = client.get("/api/v1/agents/agent-v/slots", headers=user).json()["slots"]
        assert [s["container"] and s["container"]["id"] for s in slots] == [task.allocation_id, None]
    finally:
        fake.close()


def test_only_admins_known_agents_and_slots(app: FastAPI, client: TestClient, admin: dict, user: dict) -> None:
    fake = FakeAgent(app, "agent-g", slots=1)
    try:
        for action in ("disable", "enable"):
            r = post(client, f"/api/v1/agents/agent-g/slots/0/{action}", {}, user)
            assert r.status_code == 403 and "admin" in r.json()["message"], r.text  # det: "Forbidden(...)"
        r = post(client, "/api/v1/agents/agent-g/slots/7/disable", {}, admin)
        assert r.status_code == 404 and "slotId" in r.json()["message"], r.text
        r = post(client, "/api/v1/agents/nope/slots/0/disable", {}, admin)
        assert r.status_code == 404 and "nope" in r.json()["message"], r.text
        assert client.get("/api/v1/agents/nope", headers=user).status_code == 404
        assert client.get("/api/v1/agents/agent-g/slots/7", headers=user).status_code == 404
        r = post(client, "/api/v1/agents/agent-g/slots/0/disable", {"drain": "maybe"}, admin)
        assert r.status_code == 400 and "drain" in r.json()["message"], r.text
    finally:
        fake.close()
