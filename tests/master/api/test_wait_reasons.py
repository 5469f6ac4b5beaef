"""A queued trial says why it waits, everywhere it appears; a static pool warns at create when no
agent could ever hold the trial."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.master.fakes import FakeAgent, file_entry, post

THREE_SLOTS = """\
name: big
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
resources: {slots_per_trial: 3}
"""

TOO_LARGE = (
    "no agent in pool default is large enough: it needs 3 slots, the largest agent has 2 and whole "
    "agents cannot add up to 3"
)


def create(client: TestClient, user: dict) -> dict:
    body = {
        "activate": True,
        "config": THREE_SLOTS,
        "modelDefinition": [file_entry("train.py", b"pass\n")],
        "parentId": None,
        "projectId": None,
        "template": None,
        "validateOnly": False,
    }
    r = post(client, "/api/v1/experiments", body, user)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_trial_too_large_for_every_agent_says_so_everywhere(app: FastAPI, client: TestClient, user: dict) -> None:
    agent = FakeAgent(app, "two-slots", slots=2)
    try:
        answer = create(client, user)
        # det shows its own text for the enum; pedl's CLI shows the message
        assert answer["warnings"] == ["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"]
        assert answer["warningMessages"] == [
            "no agent in pool default can hold a trial of 3 slots (the largest has 2); the trials wait until a "
            "larger agent registers"
        ]
        exp_id = answer["experiment"]["id"]
        assert agent.start_all() == []
        [trial] = client.get(f"/api/v1/experiments/{exp_id}/trials", headers=user).json()["trials"]
        assert (trial["state"], trial["waitReason"]) == ("STATE_QUEUED", TOO_LARGE)
        described = client.get(f"/api/v1/trials/{trial['id']}", headers=user).json()["trial"]
        assert described["waitReason"] == TOO_LARGE
        tasks = client.get("/api/v1/tasks", headers=user)
        [summary] = [s for s in tasks.json()["allocationIdToSummary"].values() if s["taskId"] == trial["taskId"]]
        assert (summary["state"], summary["waitReason"]) == ("STATE_QUEUED", TOO_LARGE)
        events = client.get(f"/api/v1/experiments/{exp_id}/events", headers=user)
        messages = [e["message"] for e in events.json()["events"]]
        assert f"waiting: {TOO_LARGE}" in messages
        assert answer["warningMessages"][0] in messages  # the create warning is an experiment event too
    finally:
        agent.close()


def test_no_warning_when_an_agent_can_hold_the_trial(app: FastAPI, client: TestClient, user: dict) -> None:
    agent = FakeAgent(app, "four-slots", slots=4)
    try:
        answer = create(client, user)
        assert (answer["warnings"], answer["warningMessages"]) == ([], [])
        [started] = agent.start_all()
        described = client.get(f"/api/v1/trials/{started.trial_id}", headers=user).json()["trial"]
        assert "waitReason" not in described
    finally:
        agent.close()
