"""Bad requests: malformed JSON, wrong types and bad query or path parameters get a 400 whose
message names the field, in the error body det reads; never a 500."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from tests.master.fakes import post

MALFORMED = "{not json"
CK = "3f1e2d4c-0b5a-4c6d-8e7f-9a0b1c2d3e4f"  # checkpoint uuids must be real UUIDs

# (path, body, field the message must name). Ids in paths need not exist: bodies are checked first.
WRONG_TYPES = [
    ("/api/v1/auth/login", {"username": 5}, "username"),
    ("/api/v1/auth/login", {"username": "admin", "password": ["x"]}, "password"),
    ("/api/v1/auth/login", {"username": "admin", "isHashed": "maybe"}, "isHashed"),
    ("/api/v1/auth/login", {}, "username"),
    ("/api/v1/auth/login", [1, 2], "body"),
    ("/api/v1/users", {"user": {"username": 3}}, "user.username"),
    ("/api/v1/users", {"user": "alice"}, "user"),
    ("/api/v1/users", {"user": {"username": "a", "admin": "sure"}}, "user.admin"),
    ("/api/v1/users", {"password": ""}, "user"),
    ("/api/v1/users/1/password", {"password": 5}, "password"),
    ("/api/v1/users/1/password", {"isHashed": True}, "password"),
    ("/api/v1/users/1/password", 12, "body"),
    ("/api/v1/experiments", {"config": 5}, "config"),
    ("/api/v1/experiments", {}, "config"),
    ("/api/v1/experiments", {"config": "entrypoint: x", "modelDefinition": "abc"}, "modelDefinition"),
    ("/api/v1/experiments", {"config": "entrypoint: x", "activate": [1]}, "activate"),
    ("/api/v1/experiments", {"config": "entrypoint: x", "parentId": "p"}, "parentId"),
    ("/api/v1/experiments", "config: x", "body"),
    ("/api/v1/trials/1/metrics", {"metrics": 5}, "metrics"),
    ("/api/v1/trials/1/metrics", {"group": "training"}, "metrics"),
    ("/api/v1/trials/1/metrics", {"metrics": {"metrics": {"avgMetrics": {}}}}, "metrics.stepsCompleted"),
    (
        "/api/v1/trials/1/metrics",
        {"metrics": {"stepsCompleted": "ten", "metrics": {"avgMetrics": {}}}},
        "metrics.stepsCompleted",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"metrics": {"stepsCompleted": -1, "metrics": {"avgMetrics": {}}}},
        "metrics.stepsCompleted",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"metrics": {"stepsCompleted": 1, "metrics": {"avgMetrics": [1]}}},
        "metrics.metrics.avgMetrics",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"metrics": {"stepsCompleted": 1, "trialId": "x", "metrics": {"avgMetrics": {}}}},
        "metrics.trialId",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"group": 3, "metrics": {"stepsCompleted": 1, "metrics": {"avgMetrics": {}}}},
        "group",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"group": "", "metrics": {"stepsCompleted": 1, "metrics": {"avgMetrics": {}}}},
        "group",
    ),
    (
        "/api/v1/trials/1/metrics",
        {"metrics": {"stepsCompleted": 1, "trialId": 2, "metrics": {"avgMetrics": {}}}},
        "metrics.trialId",
    ),
    ("/api/v1/trials/1/progress", {"progress": "half"}, "progress"),
    ("/api/v1/trials/1/progress", {"progress": -0.5}, "progress"),
    ("/api/v1/trials/1/progress", {}, "progress"),
    ("/api/v1/trials/1/progress", {"progress": 0.5, "is_raw": "no way"}, "is_raw"),
    ("/api/v1/checkpoints", {"uuid": 5}, "checkpoint.uuid"),
    ("/api/v1/checkpoints", {"checkpoint": 5}, "checkpoint"),
    ("/api/v1/checkpoints", {"checkpoint": {"uuid": CK, "metadata": []}}, "checkpoint.metadata"),
    ("/api/v1/checkpoints", {"uuid": CK, "resources": "a,b"}, "checkpoint.resources"),
    ("/api/v1/checkpoints", {"uuid": CK, "state": "STATE_DONE"}, "checkpoint.state"),
    ("/api/v1/checkpoints", {"uuid": CK, "metadata": {"steps_completed": "many"}}, "checkpoint.metadata"),
    ("/api/v1/checkpoints", {"metadata": {}}, "checkpoint.uuid"),
    ("/api/v1/task/logs", {"logs": 5}, "logs"),
    ("/api/v1/task/logs", {}, "logs"),
    ("/api/v1/task/logs", {"logs": [7]}, "logs[0]"),
    ("/api/v1/task/logs", {"logs": [{"taskId": "t", "log": "ok"}, {"taskId": 5, "log": "x"}]}, "logs[1].taskId"),
    ("/api/v1/task/logs", {"logs": [{"taskId": "t", "log": {"a": 1}}]}, "logs[0].log"),
    ("/api/v1/trials/1/searcher/completed_operation", {"op": 5}, "op"),
    ("/api/v1/trials/1/searcher/completed_operation", {"op": {}, "searcherMetric": {"a": 1}}, "searcherMetric"),
]

MALFORMED_ROUTES = sorted(
    {p for p, _, _ in WRONG_TYPES}
    | {
        "/api/v1/experiments/1/kill",
        "/api/v1/experiments/1/pause",
        "/api/v1/experiments/1/activate",
        "/api/v1/trials/1/kill",
        "/api/v1/trials/1/early_exit",
        "/api/v1/runs/start",
        "/api/v1/allocations/a/signals/ack_preemption",
        "/api/v1/trials/1/runner/metadata",
    }
)


def bad_request_problem(r, field: str) -> str | None:
    """Why this response is not a proper 400 naming `field`, or None when it is."""
    if r.status_code not in (400, 422):
        return f"status {r.status_code}: {r.text[:200]}"
    body = r.json()
    if field not in body.get("message", ""):
        return f"message does not name {field!r}: {body.get('message')!r}"
    # det reads `message` for some statuses and `error.error` for others
    if body["error"]["error"] != body["message"] or body["code"] != 3:  # gRPC INVALID_ARGUMENT
        return f"error body not in det's shape: {body}"
    return None


def assert_bad_request(r, field: str) -> None:
    problem = bad_request_problem(r, field)
    assert problem is None, problem


# Each table runs in one test per database (an app per case would cost a database each); every
# failing row is reported together.


def test_wrong_types_name_the_field(client: TestClient, admin: dict) -> None:
    failures = []
    for path, body, field in WRONG_TYPES:
        r = post(client, path, body, admin)
        problem = bad_request_problem(r, field)
        if problem is None:
            fields = [f["field"] for f in r.json().get("fields", [])]
            if not any(f == field or f.startswith(field) for f in fields):
                problem = f"fields {fields} do not include {field!r}"
        if problem:
            failures.append((path, json.dumps(body), problem))
    assert failures == []


def test_malformed_json_is_400_on_every_post_route(client: TestClient, admin: dict) -> None:
    failures = []
    for path in MALFORMED_ROUTES:
        r = post(client, path, raw=MALFORMED, headers=admin)
        problem = bad_request_problem(r, "body")
        if problem is None and "malformed JSON" not in r.json()["message"]:
            problem = r.json()["message"]
        if problem:
            failures.append((path, problem))
    assert failures == []


@pytest.mark.parametrize("raw", [b"\x80{", b"\xc3(", b'"\xc3("', b"\xff\xfe\x00{"])
def test_invalid_utf8_is_400(client: TestClient, admin: dict, raw: bytes) -> None:
    failures = [
        (path, problem)
        for path in MALFORMED_ROUTES
        if (problem := bad_request_problem(client.post(path, content=raw, headers=admin), "body"))
    ]
    assert failures == []


@pytest.mark.parametrize("path", ["/api/v1/experiments/1/kill", "/api/v1/experiments/1/pause", "/api/v1/trials/1/kill"])
def test_empty_body_is_fine_where_det_sends_none(client: TestClient, admin: dict, path: str) -> None:
    r = client.post(path, headers=admin)  # det: Content-Length 0
    assert r.status_code == 404  # nothing there; not a body problem


BAD_PARAMS = [
    ("/api/v1/experiments?limit=abc", "limit"),
    ("/api/v1/experiments?offset=-1", "offset"),
    ("/api/v1/experiments?offset=1.5", "offset"),
    ("/api/v1/experiments?archived=maybe", "archived"),
    ("/api/v1/experiments/1/trials?limit=x", "limit"),
    ("/api/v1/experiments/1/checkpoints?limit=-3", "limit"),
    ("/api/v1/experiments/1/events?after=soon", "after"),
    ("/api/v1/trials/1/workloads?offset=abc", "offset"),
    ("/api/v1/trials/1/logs?limit=abc", "limit"),
    ("/api/v1/trials/1/logs?follow=perhaps", "follow"),
    ("/api/v1/allocations/a/signals/preemption?timeout_seconds=long", "timeout_seconds"),
    ("/api/v1/allocations/a/signals/preemption?timeout_seconds=100000", "timeout_seconds"),
    ("/api/v1/experiments/abc", "experiment_id"),
    ("/api/v1/experiments/1.5/trials", "experiment_id"),
    ("/api/v1/trials/abc", "trial_id"),
    ("/api/v1/trials/abc/logs", "trial_id"),
]


def test_bad_query_and_path_parameters_name_the_param(client: TestClient, admin: dict) -> None:
    failures = [
        (path, problem)
        for path, param in BAD_PARAMS
        if (problem := bad_request_problem(client.get(path, headers=admin), param))
    ]
    assert failures == []


def test_bad_path_parameter_on_post(client: TestClient, admin: dict) -> None:
    assert_bad_request(post(client, "/api/v1/users/me/password", "x", admin), "user_id")
    assert_bad_request(post(client, "/api/v1/experiments/x/kill", None, admin), "experiment_id")


def test_unknown_route_is_404_in_the_error_shape(client: TestClient, admin: dict) -> None:
    r = client.get("/api/v1/nothing-here", headers=admin)
    assert r.status_code == 404
    assert r.json()["message"]


def test_unknown_experiment_action_is_404(client: TestClient, admin: dict) -> None:
    assert post(client, "/api/v1/experiments/1/explode", None, admin).status_code == 404


@pytest.mark.parametrize(
    ("path", "what"),
    [
        ("/api/v1/experiments/999", "experiment 999"),
        ("/api/v1/trials/999", "trial 999"),
        ("/api/v1/checkpoints/nope", "checkpoint nope"),
    ],
)
def test_missing_things_are_404_with_a_message(client: TestClient, admin: dict, path: str, what: str) -> None:
    r = client.get(path, headers=admin)
    assert r.status_code == 404
    assert what in r.json()["message"]


HUGE = 10**30  # beyond int64, what both databases store
# Refused before the database sees them, with the field named, the same on SQLite and PostgreSQL. ""
# (path parameters): any 4xx; the routers pass those to the database, whose refusal is the safety net.
UNSTORABLE = [
    ("/api/v1/checkpoints", {"uuid": CK, "training": {"trialId": "abc"}}, "checkpoint.training"),
    ("/api/v1/checkpoints", {"uuid": CK, "training": {"trialId": HUGE}}, "training.trialId"),
    ("/api/v1/checkpoints", {"uuid": CK, "metadata": {"steps_completed": HUGE}}, "metadata.steps_completed"),
    (
        "/api/v1/trials/{tid}/metrics",
        {"metrics": {"stepsCompleted": HUGE, "metrics": {"avgMetrics": {}}}},
        "metrics.stepsCompleted",
    ),
    (
        "/api/v1/trials/{tid}/metrics",
        {"metrics": {"stepsCompleted": 1, "trialRunId": HUGE, "metrics": {"avgMetrics": {}}}},
        "metrics.trialRunId",
    ),
    ("/api/v1/trials/{tid}/searcher/completed_operation", {"op": {"length": HUGE}}, "op.length"),
    ("/api/v1/trials/{tid}/progress", {"progress": float("inf")}, "progress"),
    ("/api/v1/trials/{tid}/progress", {"progress": float("nan")}, "progress"),
    ("/api/v1/trials/{tid}/early_exit", {"reason": "x\u0000y"}, "reason"),
    ("/api/v1/task/logs", {"logs": [{"taskId": "{task}", "log": "a\u0000b"}]}, "logs[0].log"),
    ("/api/v1/users", {"user": {"username": "a\u0000b"}}, "user.username"),
    ("/api/v1/auth/login", {"username": "a\u0000b"}, "username"),
    (f"/api/v1/experiments/{HUGE}/kill", None, ""),
    (f"/api/v1/trials/{HUGE}/kill", None, ""),
]
UNSTORABLE_GETS = [
    f"/api/v1/experiments/{HUGE}",
    f"/api/v1/trials/{HUGE}",
    f"/api/v1/trials/{HUGE}/logs",
    "/api/v1/checkpoints/a%00b",
    "/api/v1/experiments?users=a%00b",
    "/api/v1/experiments?offset=" + str(HUGE),
]


def test_values_the_database_cannot_store_are_not_500(client: TestClient, admin: dict, agent) -> None:
    """Out-of-range integers and NUL characters: SQLite and PostgreSQL refuse them differently;
    either way the caller gets a 4xx and the master stays healthy."""
    from tests.master.fakes import SINGLE_CONFIG, create_experiment

    create_experiment(client, admin, SINGLE_CONFIG)
    [task] = agent.start_all()
    failures = []
    for path, body, field in UNSTORABLE:
        path = path.format(tid=task.trial_id)
        if body and "logs" in body:
            body = {"logs": [{**body["logs"][0], "taskId": task.task_id}]}
        try:  # the TestClient re-raises what the app did not handle
            r = post(client, path, body, admin)
        except Exception as exc:
            failures.append((path, json.dumps(body)[:60], repr(exc)[:120]))
            continue
        if not (400 <= r.status_code < 500) or (field and field not in r.json()["message"]):
            failures.append((path, json.dumps(body)[:60], r.status_code, r.text[:120]))
    for path in UNSTORABLE_GETS:
        try:
            r = client.get(path, headers=admin)
        except Exception as exc:
            failures.append((path, repr(exc)[:120]))
            continue
        if r.status_code >= 500:
            failures.append((path, r.status_code, r.text[:120]))
    assert failures == []
    assert client.get("/api/v1/me", headers=admin).status_code == 200  # still serving


def test_a_database_that_went_away_is_503_not_500(app, client, admin, monkeypatch) -> None:
    """pedl.core and det retry a 503; a PostgreSQL restart must not look like a master bug."""
    from sqlalchemy.exc import OperationalError

    from pedl.master.experiments import service as experiments_service

    def down(*_a, **_k):
        raise OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly"))

    monkeypatch.setattr(experiments_service, "list_page", down)
    r = client.get("/api/v1/experiments", headers=admin)
    assert r.status_code == 503
    assert "database" in r.json()["message"]


def test_an_illegal_transition_is_a_logged_500(app, client, admin, monkeypatch, caplog) -> None:
    """A refused lifecycle edge is a master bug, not the user's: 500, with the edge in the log."""
    import logging

    from pedl.master.experiments import service as experiments_service
    from pedl.master.lifecycle.states import ExperimentState, check_transition

    def bug(*_a, **_k):
        check_transition("experiment", 7, ExperimentState.COMPLETED, ExperimentState.PAUSED)

    monkeypatch.setattr(experiments_service, "list_page", bug)
    with caplog.at_level(logging.ERROR, logger="pedl.master.api.errors"):
        r = client.get("/api/v1/experiments", headers=admin)
    assert r.status_code == 500 and r.json()["pedlCode"] == "internal"
    logged = [rec for rec in caplog.records if rec.levelno == logging.ERROR and "illegal transition" in rec.message]
    assert logged and "experiment 7" in logged[0].message
    assert "STATE_COMPLETED" in logged[0].message and "STATE_PAUSED" in logged[0].message


def test_a_client_that_hangs_up_mid_body_is_one_log_line_not_a_5xx(app, client, caplog) -> None:
    """Content-Length: 100, a few bytes, then the connection drops: Starlette raises ClientDisconnect
    while the body is read. That is one INFO line naming the client, no traceback, and a 4xx in
    /metrics (the answer reaches nobody)."""
    import asyncio
    import logging

    messages = [{"type": "http.request", "body": b'{"user', "more_body": True}, {"type": "http.disconnect"}]

    async def receive() -> dict:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/auth/login",
        "raw_path": b"/api/v1/auth/login",
        "root_path": "",
        "query_string": b"",
        "headers": [(b"content-length", b"100")],
        "client": ("192.0.2.7", 40000),
        "server": ("master", 8080),
    }
    with caplog.at_level(logging.INFO):
        asyncio.run(app(scope, receive, send))
    assert [m["status"] for m in sent if m["type"] == "http.response.start"] == [499]
    lines = [r for r in caplog.records if "192.0.2.7" in r.getMessage()]
    assert len(lines) == 1 and "went away" in lines[0].getMessage(), [r.getMessage() for r in caplog.records]
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    statuses = {
        s.labels["status"]
        for family in app.state.ctx.metrics.registry.collect()
        if family.name == "pedl_api_request_duration_seconds"
        for s in family.samples
        if s.name.endswith("_count") and s.labels["route"] == "/api/v1/auth/login"
    }
    assert statuses == {"4xx"}
