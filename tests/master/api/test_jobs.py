"""The job queue over the API (`det job list|update`): each pool's jobs in the scheduler's order with
every key det's v1Job requires, and the updates: priority and weight (as `det e set`), a place ahead
of or behind another job (which the scheduler then honours), and another pool while nothing runs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.master.app import create_app
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, bearer, create_experiment, login, post

# determined 0.38.1, bindings.v1Job.from_json and v1JobSummary.from_json
JOB_KEYS = {
    "allocatedSlots",
    "entityId",
    "isPreemptible",
    "jobId",
    "name",
    "requestedSlots",
    "resourcePool",
    "submissionTime",
    "type",
    "username",
    "workspaceId",
}


def jobs(client: TestClient, headers: dict, **params) -> list[dict]:
    r = client.get("/api/v1/job-queues-v2", headers=headers, params=params)
    assert r.status_code == 200, r.text
    return [j["full"] for j in r.json()["jobs"]]


def ids(got: list[dict]) -> list[str]:
    return [j["jobId"] for j in got]


def update(client: TestClient, headers: dict, *updates: dict):
    return post(client, "/api/v1/job-queues", {"updates": list(updates)}, headers)


def three(client: TestClient, headers: dict, clock: ManualClock) -> list[dict]:
    """Three one-slot experiments submitted a second apart."""
    out = []
    for _ in range(3):
        out.append(create_experiment(client, headers, SINGLE_CONFIG))
        clock.advance(1)
    return out


def test_the_queue_in_the_schedulers_order_with_every_key_det_requires(
    client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    a, b, c = three(client, user, clock)
    agent.start_all()  # one slot: a runs, b and c wait
    got = jobs(client, user)
    assert ids(got) == [a["jobId"], b["jobId"], c["jobId"]] == [f"job-{e['id']}" for e in (a, b, c)]
    for job in got:
        assert set(job) >= JOB_KEYS, JOB_KEYS - set(job)
        assert set(job["summary"]) == {"state", "jobsAhead"}
    assert [(j["summary"]["state"], j["summary"]["jobsAhead"]) for j in got] == [
        ("STATE_SCHEDULED", 0),
        ("STATE_QUEUED", 1),
        ("STATE_QUEUED", 2),
    ]
    first = got[0]
    assert (first["type"], first["entityId"], first["name"], first["username"], first["resourcePool"]) == (
        "TYPE_EXPERIMENT",
        str(a["id"]),
        "single-exp",
        "determined",
        "default",
    )
    assert (first["allocatedSlots"], first["requestedSlots"], got[1]["allocatedSlots"]) == (1, 1, 0)
    assert (first["priority"], first["weight"]) == (42, 1.0)
    assert ids(jobs(client, user, orderBy="ORDER_BY_DESC")) == ids(got)[::-1]
    assert ids(jobs(client, user, states="STATE_QUEUED")) == ids(got)[1:]
    r = client.get("/api/v1/job-queues-v2", headers=user, params={"limit": 1, "offset": 1})
    assert [j["full"]["jobId"] for j in r.json()["jobs"]] == [b["jobId"]]
    assert r.json()["pagination"] == {"offset": 1, "limit": 1, "startIndex": 1, "endIndex": 2, "total": 3}
    assert jobs(client, user, resourcePool="default") == got


def test_ahead_of_and_behind_move_a_job_and_the_scheduler_follows(
    client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    a, b, c = three(client, user, clock)
    [running] = agent.start_all()
    assert update(client, user, {"jobId": c["jobId"], "aheadOf": b["jobId"]}).json() == {}
    assert ids(jobs(client, user)) == [a["jobId"], c["jobId"], b["jobId"]]
    events = client.get(f"/api/v1/experiments/{c['id']}/events", headers=user).json()["events"]
    assert any(f"moved ahead of {b['jobId']}" in e["message"] for e in events)
    agent.exit(running.allocation_id, 0)  # a completes; the slot goes to c, now ahead of b
    [started] = agent.start_all()
    assert started.task_id.startswith(f"{c['id']}.")
    assert update(client, user, {"jobId": c["jobId"], "behindOf": b["jobId"]}).status_code == 200
    got = jobs(client, user)  # the queue's order, running or not: c's place counts for its next trials
    assert [(j["jobId"], j["summary"]["state"]) for j in got] == [
        (b["jobId"], "STATE_QUEUED"),
        (c["jobId"], "STATE_SCHEDULED"),
    ]


def test_a_job_moves_between_jobs_submitted_at_the_same_instant(app: FastAPI, client: TestClient, user: dict) -> None:
    a, b, c, d = (create_experiment(client, user, SINGLE_CONFIG) for _ in range(4))  # the clock stands still
    assert update(client, user, {"jobId": d["jobId"], "aheadOf": b["jobId"]}).status_code == 200
    assert ids(jobs(client, user)) == [a["jobId"], d["jobId"], b["jobId"], c["jobId"]]
    assert update(client, user, {"jobId": a["jobId"], "behindOf": b["jobId"]}).status_code == 200
    assert ids(jobs(client, user)) == [d["jobId"], b["jobId"], a["jobId"], c["jobId"]]
    agent = FakeAgent(app, "agent-1", slots=1)  # its one slot goes to the first job of the queue
    try:
        [started] = agent.start_all()
        assert started.task_id.startswith(f"{d['id']}.")
    finally:
        agent.close()


def test_priority_and_weight_change_the_config_and_the_live_allocations(
    client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    a, b, c = three(client, user, clock)
    agent.start_all()
    assert (
        update(client, user, {"jobId": c["jobId"], "priority": 10, "weight": None, "resourcePool": None}).status_code
        == 200
    )
    assert update(client, user, {"jobId": c["jobId"], "weight": 2.5}).status_code == 200
    got = jobs(client, user)
    assert ids(got) == [c["jobId"], a["jobId"], b["jobId"]]  # more urgent than the running one
    assert (got[0]["priority"], got[0]["weight"]) == (10, 2.5)
    config = client.get(f"/api/v1/experiments/{c['id']}", headers=user).json()["config"]
    assert (config["resources"]["priority"], config["resources"]["weight"]) == (10, 2.5)
    tasks = client.get("/api/v1/tasks", headers=user).json()["allocationIdToSummary"]
    assert [t["priority"] for t in tasks.values() if t["taskId"].startswith(f"{c['id']}.")] == [10]


def test_bad_updates_are_refused_naming_the_field(
    client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    a, b, c = three(client, user, clock)
    agent.start_all()
    update(client, user, {"jobId": c["jobId"], "priority": 7})
    cases = [
        ({"jobId": "3", "priority": 5}, 400, "updates[0].jobId"),
        ({"jobId": "job-999", "priority": 5}, 404, None),
        ({"jobId": b["jobId"], "priority": 5, "weight": 2}, 400, "updates[0]"),
        ({"jobId": b["jobId"]}, 400, "updates[0]"),
        ({"jobId": b["jobId"], "priority": 0}, 400, "updates[0].priority"),
        ({"jobId": b["jobId"], "weight": -1}, 400, "updates[0].weight"),
        ({"jobId": b["jobId"], "aheadOf": b["jobId"]}, 400, "updates[0].aheadOf"),
        ({"jobId": b["jobId"], "aheadOf": c["jobId"]}, 400, "updates[0].aheadOf"),  # another priority
        ({"jobId": b["jobId"], "behindOf": "job-999"}, 400, "updates[0].behindOf"),
        ({"jobId": b["jobId"], "resourcePool": "nope"}, 400, "updates[0].resourcePool"),
        ({"jobId": a["jobId"], "resourcePool": "nope"}, 400, "updates[0].resourcePool"),
    ]
    for body, status, field in cases:
        r = update(client, user, body)
        assert r.status_code == status, (body, r.text)
        if field:
            assert r.json()["fields"][0]["field"] == field, (body, r.json())
    assert post(client, "/api/v1/job-queues", {"updates": "x"}, user).status_code == 400
    for params, field in (({"states": "STATE_BOGUS"}, "states"), ({"resourcePool": "nope"}, "resourcePool")):
        r = client.get("/api/v1/job-queues-v2", headers=user, params=params)
        assert r.status_code == 400 and r.json()["fields"][0]["field"] == field, r.text
    assert ids(jobs(client, user)) == [c["jobId"], a["jobId"], b["jobId"]]  # nothing else changed
    config = client.get(f"/api/v1/experiments/{b['id']}", headers=user).json()["config"]
    assert config["resources"]["priority"] == 42


def test_only_the_owner_or_an_admin_updates_a_job(client: TestClient, user: dict, admin: dict) -> None:
    mine = create_experiment(client, admin, SINGLE_CONFIG)
    r = update(client, user, {"jobId": mine["jobId"], "priority": 5})
    assert r.status_code == 403, r.text
    theirs = create_experiment(client, user, SINGLE_CONFIG)
    assert update(client, admin, {"jobId": theirs["jobId"], "priority": 5}).status_code == 200
    r = update(
        client, user, {"jobId": theirs["jobId"], "behindOf": mine["jobId"]}, {"jobId": mine["jobId"], "priority": 9}
    )
    assert r.status_code == 400  # another priority: nothing of the batch was applied before it failed
    assert client.get(f"/api/v1/experiments/{mine['id']}", headers=user).json()["config"]["resources"]["priority"] == 42


@pytest.fixture
def two_pools(master_config: MasterConfig, clock: ManualClock) -> Iterator[tuple[FastAPI, TestClient]]:
    config = master_config.model_copy(
        update={
            "resource_pools": [
                ResourcePoolConfig(pool_name="default"),
                ResourcePoolConfig(pool_name="big", max_slots_per_trial=8),
            ]
        }
    )
    app = create_app(config, clock=clock)
    with TestClient(app) as client:
        yield app, client


def test_a_job_moves_to_another_pool_while_none_of_its_trials_runs(
    two_pools: tuple[FastAPI, TestClient], clock: ManualClock
) -> None:
    app, client = two_pools
    user = bearer(login(client, "determined"))
    agent = FakeAgent(app, "agent-1", slots=1)
    try:
        a, b, _ = three(client, user, clock)
        agent.start_all()
        assert update(client, user, {"jobId": b["jobId"], "resourcePool": "big"}).status_code == 200
        got = client.get(f"/api/v1/experiments/{b['id']}", headers=user).json()
        assert (got["experiment"]["resourcePool"], got["config"]["resources"]["resource_pool"]) == ("big", "big")
        tasks = client.get("/api/v1/tasks", headers=user).json()["allocationIdToSummary"]
        assert [t["resourcePool"] for t in tasks.values() if t["taskId"].startswith(f"{b['id']}.")] == ["big"]
        assert ids(jobs(client, user, resourcePool="big")) == [b["jobId"]]
        assert b["jobId"] not in ids(jobs(client, user, resourcePool="default"))
        r = update(client, user, {"jobId": a["jobId"], "resourcePool": "big"})
        assert r.status_code == 409 and "running" in r.json()["message"], r.text
        assert (
            client.get(f"/api/v1/experiments/{a['id']}", headers=user).json()["experiment"]["resourcePool"] == "default"
        )
    finally:
        agent.close()


def test_a_job_names_the_workspace_of_its_experiments_project(client: TestClient, user: dict) -> None:
    ws = post(client, "/api/v1/workspaces", {"name": "team"}, user).json()["workspace"]
    project = post(
        client, f"/api/v1/workspaces/{ws['id']}/projects", {"name": "p", "workspaceId": ws["id"]}, user
    ).json()["project"]
    body = {"activate": True, "config": SINGLE_CONFIG, "modelDefinition": [], "projectId": project["id"]}
    exp = post(client, "/api/v1/experiments", body, user).json()["experiment"]
    plain = create_experiment(client, user, SINGLE_CONFIG)
    got = {j["entityId"]: j["workspaceId"] for j in jobs(client, user)}
    assert got == {str(exp["id"]): ws["id"], str(plain["id"]): 1} and ws["id"] != 1
