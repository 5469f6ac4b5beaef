"""Changing a live experiment's max_slots through PATCH (as `det e set max-slots` sends it): the next
scheduling pass applies it; running trials keep their slots."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.master.fakes import GRID_CONFIG, FakeAgent, create_experiment

THREE = GRID_CONFIG.replace("vals: [0.1, 0.2]", "vals: [0.1, 0.2, 0.3]")


def _trials(client: TestClient, headers: dict, exp_id: int) -> list[dict]:
    return client.get(f"/api/v1/experiments/{exp_id}/trials", headers=headers).json()["trials"]


def test_max_slots_caps_the_experiment_and_a_patch_applies_at_the_next_pass(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    fake = FakeAgent(app, "agent-1", slots=3)
    try:
        exp = create_experiment(client, user, THREE + "resources: {max_slots: 1}\n")
        assert len(fake.start_all()) == 1  # one of three: the cap is 1 slot
        assert fake.start_all() == []
        waiting = [t for t in _trials(client, user, exp["id"]) if t["state"] == "STATE_QUEUED"]
        assert len(waiting) == 2
        assert all("max_slots" in t["waitReason"] for t in waiting), waiting

        r = client.patch(
            f"/api/v1/experiments/{exp['id']}", headers=user, json={"id": exp["id"], "resources": {"maxSlots": 3}}
        )
        assert r.status_code == 200, r.text
        assert r.json()["experiment"]["config"]["resources"]["max_slots"] == 3
        assert len(fake.start_all()) == 2  # the next pass places the other two

        # lowering the cap stops nothing that runs
        r = client.patch(f"/api/v1/experiments/{exp['id']}", headers=user, json={"resources": {"maxSlots": 1}})
        assert r.status_code == 200, r.text
        fake.start_all()
        assert not [m for m in fake.messages() if m["type"] == "kill_task"]
        assert [t["state"] for t in _trials(client, user, exp["id"])] == ["STATE_RUNNING"] * 3

        # null removes the cap
        r = client.patch(f"/api/v1/experiments/{exp['id']}", headers=user, json={"resources": {"maxSlots": None}})
        assert r.status_code == 200 and r.json()["experiment"]["config"]["resources"]["max_slots"] is None
    finally:
        fake.close()


def test_another_users_max_slots_changes_nothing(client: TestClient, user: dict, admin: dict) -> None:
    exp = create_experiment(client, admin, THREE)
    r = client.patch(f"/api/v1/experiments/{exp['id']}", headers=user, json={"resources": {"maxSlots": 2}})
    assert r.status_code == 403
    shown = client.get(f"/api/v1/experiments/{exp['id']}", headers=admin).json()
    assert shown["config"]["resources"].get("max_slots") is None
