"""`pedl job list|update`: the queue as a table (or JSON), and one change per update sent as det's
v1QueueControl to POST /api/v1/job-queues."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster, page


def job(exp_id: int, state: str = "STATE_QUEUED", ahead: int = 0, **extra) -> dict:
    full = {
        "jobId": f"job-{exp_id}",
        "type": "TYPE_EXPERIMENT",
        "entityId": str(exp_id),
        "name": f"exp-{exp_id}",
        "submissionTime": "2025-01-02T03:04:05Z",
        "username": "determined",
        "resourcePool": "default",
        "isPreemptible": False,
        "priority": 42,
        "weight": 1.0,
        "requestedSlots": 1,
        "allocatedSlots": 0,
        "workspaceId": 1,
        "summary": {"state": state, "jobsAhead": ahead},
        **extra,
    }
    return {"full": full, "summary": full["summary"]}


def test_the_queue_is_a_table_in_its_order(cli, master: FakeMaster) -> None:
    master.route(
        "GET",
        "/api/v1/job-queues-v2",
        page("jobs", [job(3, "STATE_SCHEDULED", 0, allocatedSlots=1), job(5, ahead=1, priority=10)]),
    )
    result = cli("job", "list", "--resource-pool", "default")
    assert result.exit_code == 0, result.output
    lines = [ln for ln in result.stdout.splitlines() if "job-" in ln]
    assert "job-3" in lines[0] and "SCHEDULED" in lines[0] and "1/1" in lines[0]
    assert "job-5" in lines[1] and "QUEUED" in lines[1] and "exp-5 (5)" in lines[1] and " 10 " in lines[1]
    assert master.calls("GET", "/api/v1/job-queues-v2")[0].q("resourcePool") == "default"
    listed = json.loads(cli("job", "list", "--json").stdout)
    assert [j["jobId"] for j in listed] == ["job-3", "job-5"]


def test_an_update_sends_one_change(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/job-queues", {})
    assert cli("job", "update", "job-5", "--priority", "10").exit_code == 0
    result = cli("job", "update", "job-5", "--ahead-of", "job-3")
    assert result.exit_code == 0 and "job-5 moved ahead of job-3" in result.stdout
    cli("job", "update", "job-5", "--resource-pool", "big")
    bodies = [r.json for r in master.calls("POST", "/api/v1/job-queues")]
    assert bodies == [
        {"updates": [{"jobId": "job-5", "priority": 10}]},
        {"updates": [{"jobId": "job-5", "aheadOf": "job-3"}]},
        {"updates": [{"jobId": "job-5", "resourcePool": "big"}]},
    ]


def test_an_update_needs_exactly_one_change_and_shows_the_masters_refusal(cli, master: FakeMaster) -> None:
    master.route(
        "POST",
        "/api/v1/job-queues",
        (400, {"code": 3, "pedlCode": "invalid_argument", "message": "updates[0].aheadOf: job-3 has priority 10"}),
    )
    for args in ((), ("--priority", "1", "--weight", "2")):
        result = cli("job", "update", "job-5", *args)
        assert result.exit_code == 1 and "give one of --priority" in result.output
    assert master.calls("POST", "/api/v1/job-queues") == []
    refused = cli("job", "update", "job-5", "--ahead-of", "job-3")
    assert refused.exit_code == 1 and "updates[0].aheadOf: job-3 has priority 10" in refused.output
