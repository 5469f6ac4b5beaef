"""Launching commands, notebooks, shells and TensorBoards, as bounded per user and per agent: a user's live
tasks of no slots (limits.max_zero_slot_tasks_per_user: refused at launch) and the zero-slot tasks the
scheduler places on one agent (limits.max_zero_slot_tasks_per_agent: the rest wait, saying why)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from pedl.master.db import models
from tests.master.fakes import FakeAgent, post
from tests.master.other_users import make_user

ZERO = {"config": {"entrypoint": ["sleep", "1000"], "resources": {"slots": 0}}}


def command(client: TestClient, headers: dict, body: dict = ZERO):
    return post(client, "/api/v1/commands", body, headers)


def wait_reason(app: FastAPI, task_id: str) -> str | None:
    with app.state.ctx.db.read_session() as s:
        return s.scalar(select(models.Allocation.wait_reason).where(models.Allocation.task_id == task_id))


def test_zero_slot_tasks_are_bounded_per_user_at_launch_and_per_agent_by_the_scheduler(
    app: FastAPI, client: TestClient, admin: dict, agent: FakeAgent, monkeypatch: pytest.MonkeyPatch
) -> None:
    limits = app.state.ctx.config.limits
    monkeypatch.setattr(limits, "max_zero_slot_tasks_per_user", 3)
    monkeypatch.setattr(limits, "max_zero_slot_tasks_per_agent", 2)
    alice, bob = make_user(client, admin, "alice"), make_user(client, admin, "bob")
    ids = []
    for _ in range(3):
        r = command(client, alice)
        assert r.status_code == 200, r.text
        ids.append(r.json()["command"]["id"])
        app.state.ctx.clock.advance(1)  # queued one after the other
    started = {t.task_id: t for t in agent.start_all()}
    assert set(started) == set(ids[:2])  # the agent's cap: the third waits, saying why
    assert "limits.max_zero_slot_tasks_per_agent" in (wait_reason(app, ids[2]) or "")
    r = command(client, alice)  # her fourth live one: refused at launch, nothing queued
    assert r.status_code == 429 and r.json()["fields"][0]["field"] == "config.resources.slots", r.text
    assert "limits.max_zero_slot_tasks_per_user" in r.json()["message"]
    assert r.json()["message"].count("3 live tasks of no slots") == 1
    one_slot = {"config": {"entrypoint": ["sleep", "1000"], "resources": {"slots": 1}}}
    assert command(client, alice, one_slot).status_code == 200  # tasks of slots are the scheduler's to queue
    assert command(client, bob).status_code == 200  # bob's are his own
    agent.exit(started[ids[0]].allocation_id, 0)
    assert ids[2] in {t.task_id for t in agent.start_all()}  # a place freed: the waiting one starts
    assert command(client, alice).status_code == 200  # and her count went down with the ended one
