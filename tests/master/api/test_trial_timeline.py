"""A trial's allocations, oldest first, for the WebUI's timeline: where each ran and why it ended."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment


def test_each_start_is_an_allocation_with_its_agent_and_end(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG + "max_restarts: 1\n")
    [first] = agent.start_all()
    agent.exit(first.allocation_id, 3, "boom")
    [second] = agent.start_all()
    r = client.get(f"/api/v1/trials/{first.trial_id}/allocations", headers=user)
    assert r.status_code == 200, r.text
    got = r.json()["allocations"]
    assert [a["id"] for a in got] == [first.allocation_id, second.allocation_id]
    done, running = got
    assert done["endedAt"] is not None and done["exitCode"] == 3 and "boom" in (done["exitReason"] or "")
    assert running["endedAt"] is None and running["startedAt"] is not None
    assert [p["agentId"] for p in running["places"]] == [agent.agent_id]
    assert running["places"][0]["instance"] is None  # a static agent: no instance behind it
    assert not done["preempted"] and not done["spotInterrupted"]
    etag = r.headers["etag"]
    assert (
        client.get(f"/api/v1/trials/{first.trial_id}/allocations", headers={**user, "If-None-Match": etag}).status_code
        == 304
    )
    agent.exit(second.allocation_id, 0)
    changed = client.get(f"/api/v1/trials/{first.trial_id}/allocations", headers={**user, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.json()["allocations"][1]["exitCode"] == 0


def test_an_unknown_trial_is_404(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/trials/999/allocations", headers=user).status_code == 404
