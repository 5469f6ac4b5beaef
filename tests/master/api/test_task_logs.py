"""A task by its id over the API (`det task logs`): GET /tasks/{id} in Determined's v1Task shape and
GET /tasks/{id}/logs with det's filters, for task ids of either shape a master has stored."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from pedl.clock import ManualClock
from pedl.common.agent_protocol import LogLine
from pedl.master.agents import service as agents_service
from pedl.master.db import models
from pedl.master.tasks import logs as task_logs
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, bearer, create_experiment, post

# bindings.v1TaskLogsResponse.from_json (determined 0.38.1)
LOG_KEYS = {"id", "level", "log", "message", "taskId", "timestamp"}


def lines(client: TestClient, headers: dict, task_id: str, **params) -> list[dict]:
    r = client.get(f"/api/v1/tasks/{task_id}/logs", headers=headers, params=params)
    assert r.status_code == 200, r.text
    return [json.loads(line)["result"] for line in r.text.splitlines()]


def texts(got: list[dict]) -> list[str]:
    return [ln["message"] for ln in got if ln["source"] != "master"]


def running_task(app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock):
    """A running trial's task with lines from its agent (stdout, stderr) and from itself (a warning)."""
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    clock.advance(10)
    agents_service.store_logs(
        app.state.ctx,
        "agent-1",
        task.allocation_id,
        [
            LogLine(timestamp=clock.now(), message="step 1"),
            LogLine(timestamp=clock.now() + 1, stdtype="stderr", message="oops"),
        ],
    )
    clock.advance(10)
    body = {"logs": [{"taskId": task.task_id, "log": "careful", "level": "LOG_LEVEL_WARNING"}]}
    assert post(client, "/api/v1/task/logs", body, bearer(task.token)).status_code == 200
    return task


def test_task_logs_as_det_reads_them(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    task = running_task(app, client, user, agent, clock)
    got = lines(client, user, task.task_id)
    assert texts(got) == ["step 1\n", "oops\n", "careful\n"]
    for ln in got:
        assert set(ln) >= LOG_KEYS and ln["taskId"] == task.task_id
    assert [int(ln["id"]) for ln in got] == sorted(int(ln["id"]) for ln in got)
    assert texts(lines(client, user, task.task_id, levels="LOG_LEVEL_WARNING")) == ["careful\n"]
    assert texts(lines(client, user, task.task_id, stdtypes="stderr")) == ["oops\n"]
    assert texts(lines(client, user, task.task_id, agentIds="agent-1")) == ["step 1\n", "oops\n"]
    assert texts(lines(client, user, task.task_id, allocationIds=task.allocation_id, searchText="o")) == ["oops\n"]
    assert texts(lines(client, user, task.task_id, containerIds="someone-else")) == []
    assert texts(lines(client, user, task.task_id, searchText="%")) == []  # plain text, not a LIKE pattern
    tail = lines(client, user, task.task_id, limit=2, orderBy="ORDER_BY_DESC")  # det's --tail 2
    assert [ln["message"] for ln in tail] == [ln["message"] for ln in got[-2:]][::-1]
    assert [ln["message"] for ln in lines(client, user, task.task_id, limit=1)] == [got[0]["message"]]
    start = clock.now() - 5  # between the agent's lines and the task's own
    after = lines(client, user, task.task_id, timestampAfter="1970-01-01T00:00:00Z")
    assert after == got
    mid = datetime.fromtimestamp(start, tz=UTC).isoformat().replace("+00:00", "Z")
    assert texts(lines(client, user, task.task_id, timestampBefore=mid)) == ["step 1\n", "oops\n"]
    assert texts(lines(client, user, task.task_id, timestampAfter=mid)) == ["careful\n"]


def test_a_followed_stream_ends_once_the_task_has(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    task = running_task(app, client, user, agent, clock)
    agent.exit(task.allocation_id, 0)
    got = lines(client, user, task.task_id, follow="true")
    assert texts(got)[:3] == ["step 1\n", "oops\n", "careful\n"]


def test_bad_log_filters_are_refused_naming_them(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    task = running_task(app, client, user, agent, clock)
    for params, field in (
        ({"levels": "LOUD"}, "levels"),
        ({"timestampAfter": "yesterday"}, "timestampAfter"),
        ({"rankIds": list(range(101))}, "rankIds"),
        ({"enableRegex": "true"}, "enableRegex"),
        ({"agentIds": [f"a{i}" for i in range(101)]}, "agentIds"),
    ):
        r = client.get(f"/api/v1/tasks/{task.task_id}/logs", headers=user, params=params)
        assert r.status_code == 400 and r.json()["fields"][0]["field"] == field, (params, r.text)
    assert client.get("/api/v1/tasks/1.nope/logs", headers=user).status_code == 404
    assert client.get("/api/v1/tasks/1.nope", headers=user).status_code == 404


def test_a_task_in_determineds_shape(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    task = running_task(app, client, user, agent, clock)
    got = client.get(f"/api/v1/tasks/{task.task_id}", headers=user).json()["task"]
    assert (got["taskId"], got["taskType"], got["trialId"], got["endTime"]) == (
        task.task_id,
        "TASK_TYPE_TRIAL",
        task.trial_id,
        None,
    )
    [alloc] = got["allocations"]
    assert (alloc["allocationId"], alloc["taskId"], alloc["state"], alloc["isReady"], alloc["slots"]) == (
        task.allocation_id,
        task.task_id,
        "STATE_RUNNING",
        True,
        1,
    )
    agent.exit(task.allocation_id, 0)
    got = client.get(f"/api/v1/tasks/{task.task_id}", headers=user).json()["task"]
    assert got["endTime"] and got["allocations"][0]["state"] == "STATE_TERMINATED"


def test_a_task_id_an_older_master_stored_still_works(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    """Trials created before Determined's shape have `{exp}.{trial}` task ids; nothing parses them."""
    task = running_task(app, client, user, agent, clock)
    with app.state.ctx.db.session() as s:
        for table in (models.Trial, models.Allocation, models.TaskLog):
            s.execute(update(table).where(table.task_id == task.task_id).values(task_id="1.1"))
    assert texts(lines(client, user, "1.1")) == ["step 1\n", "oops\n", "careful\n"]
    assert (
        client.get("/api/v1/tasks/1.1", headers=user).json()["task"]["allocations"][0]["allocationId"]
        == task.allocation_id
    )


NUL_LINE = "Logs\x00Can\x00Have\x00Null\x00Bytes"


def test_nul_bytes_come_back_as_printed_through_every_log_route(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    printed = [NUL_LINE, "keeps \ufdd0 and \ufdd0\ufdd2 as printed", "\x00"]
    agents_service.store_logs(
        app.state.ctx,
        "agent-1",
        task.allocation_id,
        [LogLine(timestamp=clock.now() + i, message=m) for i, m in enumerate(printed)],
    )
    want = [m + "\n" for m in printed]
    assert texts(lines(client, user, task.task_id)) == want
    assert texts(lines(client, user, task.task_id, limit=1, orderBy="ORDER_BY_DESC")) == want[-1:]  # tail
    assert texts(lines(client, user, task.task_id, searchText="Have")) == want[:1]
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs", headers=user)
    assert r.status_code == 200, r.text
    trial_lines = [json.loads(line)["result"] for line in r.text.splitlines()]
    assert [ln["message"] for ln in trial_lines if ln["message"] in want] == want
    agent.exit(task.allocation_id, 0)
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs", headers=user, params={"follow": "true"})
    assert NUL_LINE in [json.loads(line)["result"]["message"].rstrip("\n") for line in r.text.splitlines()]
    with app.state.ctx.db.session() as s:  # stored escaped: PostgreSQL text holds no NUL
        stored = [m for (m,) in s.execute(select(models.TaskLog.message)) if "Bytes" in m]
    assert stored and "\x00" not in stored[0]


def test_lines_stored_before_the_escape_read_as_stored(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    with app.state.ctx.db.session() as s:  # a NUL the old master had replaced, and a lone escape char
        for text in ("Logs\ufffdCan\n", "odd \ufdd0 char\n"):
            s.add(
                models.TaskLog(
                    task_id=task.task_id,
                    trial_id=task.trial_id,
                    allocation_id=task.allocation_id,
                    timestamp=clock.now(),
                    level="LOG_LEVEL_INFO",
                    stdtype="stdout",
                    source="task",
                    message=text,
                )
            )
    assert texts(lines(client, user, task.task_id)) == ["Logs\ufffdCan\n", "odd \ufdd0 char\n"]


def test_log_fields_and_determineds_rank_filters_on_task_and_trial_routes(
    app: FastAPI, client: TestClient, user: dict, agent: FakeAgent, clock: ManualClock
) -> None:
    task = running_task(app, client, user, agent, clock)
    agent.exit(task.allocation_id, 0)
    for base in (f"/api/v1/tasks/{task.task_id}/logs", f"/api/v1/trials/{task.trial_id}/logs"):
        for follow in ("false", "true"):  # follow: sent once, and the stream ends
            r = client.get(base + "/fields", headers=user, params={"follow": follow})
            assert r.status_code == 200, r.text
            [line] = r.text.splitlines()
            fields = json.loads(line)["result"]
            assert fields["agentIds"] == ["agent-1"] and fields["containerIds"] == [task.allocation_id]
            assert fields["rankIds"] == [] and {"agent", "task", "master"} >= set(fields["sources"]) >= {"task"}
            assert set(fields["stdtypes"]) >= {"stdout", "stderr"}
        # each field's value filters to some lines, as det's e2e suite checks
        for key in ("agentIds", "containerIds", "sources", "stdtypes"):
            r = client.get(base, headers=user, params={key: fields[key][0]})
            assert r.status_code == 200 and r.text.splitlines(), (base, key, r.text)
        every = client.get(base, headers=user).text.splitlines()
        assert client.get(base, headers=user, params={"rankIds": -1}).text.splitlines() == every  # "no rank"
        assert client.get(base, headers=user, params={"rankIds": -2}).text == ""  # nonsense: nothing
        assert client.get(base, headers=user, params={"rankIds": 0}).text == ""  # pedl records no rank
    assert client.get("/api/v1/tasks/nope/logs/fields", headers=user).status_code == 404
    assert client.get("/api/v1/trials/999999/logs/fields", headers=user).status_code == 404


def test_a_user_follows_a_bounded_number_of_streams(
    app: FastAPI,
    client: TestClient,
    user: dict,
    admin: dict,
    agent: FakeAgent,
    clock: ManualClock,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With limits.max_log_follows_per_user streams of theirs open (slots held, as open streams hold them),
    a user's next follow of a task's or a trial's logs is a 429 naming the setting; reading without follow,
    and another user's follow, go on; a stream that ended gives its slot back."""
    task = running_task(app, client, user, agent, clock)
    ctx = app.state.ctx
    monkeypatch.setattr(ctx.config.limits, "max_log_follows_per_user", 2)
    me = next(
        u["id"] for u in client.get("/api/v1/users", headers=admin).json()["users"] if u["username"] == "determined"
    )
    held = [task_logs.follow_slot(ctx, me) for _ in range(2)]
    for path in (f"/api/v1/tasks/{task.task_id}/logs", f"/api/v1/trials/{task.trial_id}/logs"):
        r = client.get(path, params={"follow": "true"}, headers=user)
        assert r.status_code == 429 and "limits.max_log_follows_per_user" in r.json()["message"], r.text
        assert client.get(path, headers=user).status_code == 200  # not followed: no slot
    agent.exit(task.allocation_id, 0)  # the task ends: a followed stream of it ends after its last lines
    r = client.get(f"/api/v1/tasks/{task.task_id}/logs", params={"follow": "true"}, headers=admin)
    assert r.status_code == 200 and ctx.log_follows.held() == 2  # the admin's came back when it ended
    held.pop().release()
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs", params={"follow": "true"}, headers=user)
    assert r.status_code == 200 and "step 1" in r.text
    assert ctx.log_follows.held(me) == 1  # the one still held by the test
