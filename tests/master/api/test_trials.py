"""Trials over the API: reports a running task makes with its session token (metrics, progress,
searcher completion), describe and workloads, kill, and the NDJSON log stream."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.common.agent_protocol import LogLine
from pedl.master.db import models
from pedl.master.lifecycle import log_lines as logs_service
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    StartedTask,
    bearer,
    create_experiment,
    post,
    task_header,
)


def metrics_body(trial_id: int, steps: int, values: dict, group: str = "training", run: int = 1) -> dict:
    return {
        "group": group,
        "metrics": {
            "trialId": trial_id,
            "trialRunId": run,
            "stepsCompleted": steps,
            "reportTime": None,
            "metrics": {"avgMetrics": values, "batchMetrics": None},
        },
    }


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def trial(client: TestClient, headers: dict, trial_id: int) -> dict:
    r = client.get(f"/api/v1/trials/{trial_id}", headers=headers)
    assert r.status_code == 200
    return r.json()["trial"]


def add_logs(app: FastAPI, task: StartedTask, messages: list[str], clock: ManualClock) -> None:
    ctx = app.state.ctx
    with ctx.db.session() as s:
        alloc = s.get(models.Allocation, task.allocation_id)
        lines = []
        for m in messages:
            clock.advance(1)
            lines.append(
                LogLine(timestamp=clock.now(), stdtype="stderr" if m.startswith("ERR") else "stdout", message=m)
            )
        logs_service.add_task_lines(s, alloc, "agent-1", lines)


def read_stream(text: str) -> list[dict]:
    assert text == "" or text.endswith("\n")
    lines = text.split("\n")[:-1] if text else []
    assert all(line.strip() for line in lines), "blank line in the stream"
    out = []
    for line in lines:
        obj = json.loads(line)
        assert set(obj) == {"result"}
        out.append(obj["result"])
    return out


# -- the task's environment ------------------------------------------------------------------------


def test_start_task_carries_the_det_environment(task: StartedTask) -> None:
    env = task.message["env"]
    for key in (
        "DET_CLUSTER_ID",
        "DET_TASK_ID",
        "DET_ALLOCATION_ID",
        "DET_SESSION_TOKEN",
        "DET_TASK_TYPE",
        "DET_TRIAL_ID",
        "DET_EXPERIMENT_ID",
        "DET_TRIAL_SEED",
        "DET_HPARAMS",
        "DET_EXPERIMENT_CONFIG",
        "DET_STEPS_COMPLETED",
        "DET_TRIAL_RUN_ID",
        "DET_LATEST_CHECKPOINT",
        "DET_USER",
        "DET_USER_TOKEN",
        "DET_RESOURCES_ID",
    ):
        assert key in env, key
    assert env["DET_SESSION_TOKEN"] == task.token
    assert env["DET_ALLOCATION_ID"] == task.allocation_id
    assert env["DET_USER"] == "determined"
    assert env["DET_TASK_TYPE"] == "TRIAL"
    assert json.loads(env["DET_EXPERIMENT_CONFIG"])["searcher"]["name"] == "single"
    assert task.message["context_url"].endswith(f"/api/v1/tasks/{task.task_id}/context_directory")
    assert task.message["slot_ids"] == ["0"]


def test_det_user_token_acts_as_the_tasks_owner_while_the_task_lives(
    client: TestClient, user: dict, admin: dict, agent: FakeAgent, task: StartedTask
) -> None:
    user_token = task.message["env"]["DET_USER_TOKEN"]
    assert user_token != task.token and task.token in user_token
    as_owner = bearer(user_token)
    me = client.get("/api/v1/me", headers=as_owner)
    assert me.status_code == 200 and me.json()["user"]["username"] == "determined"
    # a user's powers (the owner's experiments), none beyond them, and none of a task token's
    assert client.get("/api/v1/experiments", headers=as_owner).status_code == 200
    assert client.get("/api/v1/users", headers=as_owner).status_code == 200
    r = post(client, "/api/v1/users", {"user": {"username": "mallory", "active": True}, "password": ""}, as_owner)
    assert r.status_code == 403, r.text
    r = post(client, f"/api/v1/trials/{task.trial_id}/progress", 0.5, as_owner)
    assert r.status_code == 403 and "task token" in r.json()["message"], r.text
    # a made-up suffix is nobody
    assert client.get("/api/v1/me", headers=bearer(user_token + "x")).status_code == 401
    # it ends with the allocation, at once (the caller cache forgets it)
    agent.exit(task.allocation_id, 0)
    r = client.get("/api/v1/me", headers=as_owner)
    assert r.status_code == 401 and "ended with its task" in r.json()["message"]


# -- metrics ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("header", [bearer, task_header], ids=["authorization", "allocation-token"])
def test_metrics_with_the_task_session_token(client: TestClient, user: dict, task: StartedTask, header) -> None:
    h = header(task.token)
    assert (
        post(
            client,
            f"/api/v1/trials/{task.trial_id}/metrics",
            metrics_body(task.trial_id, 5, {"loss": 0.9, "acc": "NaN"}),
            h,
        ).status_code
        == 200
    )
    assert (
        post(
            client,
            f"/api/v1/trials/{task.trial_id}/metrics",
            metrics_body(task.trial_id, 10, {"loss": 0.4}, "validation"),
            h,
        ).status_code
        == 200
    )
    t = trial(client, user, task.trial_id)
    assert t["state"] == "STATE_RUNNING"
    assert t["totalBatchesProcessed"] == 10
    assert t["latestValidation"]["metrics"]["avgMetrics"] == {"loss": 0.4}
    assert t["bestValidation"]["totalBatches"] == 10
    assert t["searcherMetricValue"] == pytest.approx(0.4)
    assert t["summaryMetrics"]["latest_training"]["metrics"]["acc"] == "NaN"

    work = client.get(f"/api/v1/trials/{task.trial_id}/workloads", headers=user).json()
    kinds = [next(iter(w)) for w in work["workloads"]]
    assert kinds == ["training", "validation"]
    assert all(next(iter(w.values()))["endTime"] for w in work["workloads"])
    assert work["pagination"]["total"] == 2

    listed = client.get(f"/api/v1/trials/{task.trial_id}/metrics?group=validation", headers=user).json()
    assert [m["stepsCompleted"] for m in listed["metrics"]] == [10]


def test_best_validation_respects_smaller_is_better(client: TestClient, user: dict, task: StartedTask) -> None:
    h = bearer(task.token)
    for steps, loss in ((10, 0.5), (20, 0.2), (30, 0.7)):
        post(
            client,
            f"/api/v1/trials/{task.trial_id}/metrics",
            metrics_body(task.trial_id, steps, {"loss": loss}, "validation"),
            h,
        )
    t = trial(client, user, task.trial_id)
    assert t["bestValidation"]["totalBatches"] == 20
    assert t["latestValidation"]["totalBatches"] == 30
    assert t["searcherMetricValue"] == pytest.approx(0.2)


def test_task_token_cannot_report_for_another_trial(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, GRID_CONFIG)
    agent2 = FakeAgent(client.app, "agent-2", slots=1)  # type: ignore[arg-type]
    try:
        tasks = agent.start_all() + agent2.start_all()
        assert len(tasks) == 2
        a, b = tasks
        r = post(
            client, f"/api/v1/trials/{b.trial_id}/metrics", metrics_body(b.trial_id, 1, {"loss": 1}), bearer(a.token)
        )
        assert r.status_code == 403
        assert (
            post(client, f"/api/v1/trials/{b.trial_id}/progress", {"progress": 0.5}, bearer(a.token)).status_code == 403
        )
    finally:
        agent2.close()


def test_task_token_dies_with_its_allocation(client: TestClient, task: StartedTask, agent: FakeAgent) -> None:
    h = bearer(task.token)
    assert client.get("/api/v1/me", headers=h).json()["user"]["username"] == "determined"
    agent.exit(task.allocation_id, 0)
    assert client.get("/api/v1/me", headers=h).status_code == 401
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", metrics_body(task.trial_id, 1, {"x": 1}), h)
    assert r.status_code == 401


def test_the_owner_and_admins_may_report_with_a_login_token(
    client: TestClient, user: dict, admin: dict, task: StartedTask
) -> None:
    # as Determined's SDK does (trialRunId 0); another user may not (tests/master/api/test_trial_time_series.py)
    for step, headers in ((3, user), (4, admin)):
        r = post(
            client, f"/api/v1/trials/{task.trial_id}/metrics", metrics_body(task.trial_id, step, {"loss": 1.0}), headers
        )
        assert r.status_code == 200, r.text
    listed = client.get(f"/api/v1/trials/{task.trial_id}/metrics", headers=user).json()["metrics"]
    assert [m["stepsCompleted"] for m in listed] == [3, 4]


def test_metrics_for_unknown_trial_is_404(client: TestClient, user: dict) -> None:
    assert post(client, "/api/v1/trials/999/metrics", metrics_body(999, 1, {"x": 1}), user).status_code == 404


def test_a_restart_replaces_metrics_of_the_same_steps(client: TestClient, user: dict, task: StartedTask) -> None:
    h = bearer(task.token)
    post(client, f"/api/v1/trials/{task.trial_id}/metrics", metrics_body(task.trial_id, 5, {"loss": 1.0}, run=1), h)
    post(client, f"/api/v1/trials/{task.trial_id}/metrics", metrics_body(task.trial_id, 5, {"loss": 0.8}, run=2), h)
    listed = client.get(f"/api/v1/trials/{task.trial_id}/metrics", headers=user).json()["metrics"]
    assert [(m["stepsCompleted"], m["metrics"]["loss"]) for m in listed] == [(5, 0.8)]


# -- progress, searcher operation, describe -------------------------------------------------------------


def test_progress(client: TestClient, user: dict, task: StartedTask) -> None:
    h = bearer(task.token)
    assert (
        post(client, f"/api/v1/trials/{task.trial_id}/progress", {"progress": 0.25, "is_raw": True}, h).status_code
        == 200
    )
    assert trial(client, user, task.trial_id)["summaryMetrics"]["progress"] == 0.25
    assert post(client, f"/api/v1/trials/{task.trial_id}/progress", 0.5, h).status_code == 200  # a bare number
    assert trial(client, user, task.trial_id)["summaryMetrics"]["progress"] == 0.5


def test_completed_operation_advances_batches(client: TestClient, user: dict, task: StartedTask) -> None:
    h = bearer(task.token)
    r = post(
        client,
        f"/api/v1/trials/{task.trial_id}/searcher/completed_operation",
        {"op": {"length": 10}, "searcherMetric": 0.3},
        h,
    )
    assert r.status_code == 200
    assert trial(client, user, task.trial_id)["totalBatchesProcessed"] == 10


def test_trial_describe_has_required_fields(client: TestClient, user: dict, task: StartedTask) -> None:
    t = trial(client, user, task.trial_id)
    for key in ("experimentId", "hparams", "id", "restarts", "startTime", "state", "totalBatchesProcessed"):
        assert key in t and t[key] is not None
    assert t["taskId"] == task.task_id


def test_trial_completes_on_clean_exit(client: TestClient, user: dict, task: StartedTask, agent: FakeAgent) -> None:
    agent.exit(task.allocation_id, 0)
    t = trial(client, user, task.trial_id)
    assert t["state"] == "STATE_COMPLETED" and t["endTime"]


def test_failed_trial_restarts_then_errors(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, SINGLE_CONFIG + "max_restarts: 1\n")
    [first] = agent.start_all()
    agent.exit(first.allocation_id, 3, "boom")
    t = trial(client, user, first.trial_id)
    assert t["state"] == "STATE_QUEUED" and t["restarts"] == 1
    [second] = agent.start_all()
    assert second.trial_id == first.trial_id and second.allocation_id != first.allocation_id
    assert second.message["env"]["DET_TRIAL_RUN_ID"] == "2"
    agent.exit(second.allocation_id, 3, "boom")
    t = trial(client, user, first.trial_id)
    assert t["state"] == "STATE_ERROR"
    exp = client.get(f"/api/v1/experiments/{t['experimentId']}", headers=user).json()["experiment"]
    assert exp["state"] == "STATE_ERROR"


def test_kill_a_running_trial(client: TestClient, user: dict, task: StartedTask, agent: FakeAgent) -> None:
    assert post(client, f"/api/v1/trials/{task.trial_id}/kill", None, user).status_code == 200
    assert trial(client, user, task.trial_id)["state"] == "STATE_STOPPING_CANCELED"
    assert [m["allocation_id"] for m in agent.messages() if m["type"] == "kill_task"] == [task.allocation_id]
    agent.exit(task.allocation_id, -15)
    assert trial(client, user, task.trial_id)["state"] == "STATE_CANCELED"


def test_kill_a_queued_trial(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, GRID_CONFIG)
    trials = client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]
    assert post(client, f"/api/v1/trials/{trials[0]['id']}/kill", None, user).status_code == 200
    assert trial(client, user, trials[0]["id"])["state"] == "STATE_CANCELED"
    assert trial(client, user, trials[1]["id"])["state"] == "STATE_QUEUED"  # the other one carries on


# -- logs ---------------------------------------------------------------------------------------------


def test_trial_logs_stream(app: FastAPI, client: TestClient, user: dict, task: StartedTask, clock: ManualClock) -> None:
    add_logs(app, task, ["epoch 1", "epoch 2\n", "ERR oops", "done"], clock)
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false", headers=user)
    assert r.status_code == 200
    lines = read_stream(r.text)
    assert [ln["message"] for ln in lines] == ["epoch 1\n", "epoch 2\n", "ERR oops\n", "done\n"]
    for ln in lines:
        assert isinstance(ln["id"], str) and ln["id"]
        assert ln["trialId"] == task.trial_id
        assert ln["level"].startswith("LOG_LEVEL_")
        assert ln["timestamp"]
        assert ln["message"].endswith("\n")
    assert [ln["level"] for ln in lines] == ["LOG_LEVEL_INFO", "LOG_LEVEL_INFO", "LOG_LEVEL_ERROR", "LOG_LEVEL_INFO"]
    ids = [int(ln["id"]) for ln in lines]
    assert ids == sorted(ids)


def test_trial_logs_head_and_tail(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, clock: ManualClock
) -> None:
    add_logs(app, task, [f"line {i}" for i in range(10)], clock)
    head = read_stream(client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false&limit=3", headers=user).text)
    assert [ln["message"] for ln in head] == ["line 0\n", "line 1\n", "line 2\n"]
    tail = read_stream(
        client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false&limit=3&orderBy=ORDER_BY_DESC", headers=user).text
    )
    assert [ln["message"] for ln in tail] == ["line 9\n", "line 8\n", "line 7\n"]  # newest first
    everything = read_stream(
        client.get(f"/api/v1/trials/{task.trial_id}/logs?orderBy=ORDER_BY_DESC", headers=user).text
    )
    assert [ln["message"] for ln in everything] == [f"line {i}\n" for i in range(9, -1, -1)]


def test_trial_logs_level_filter(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, clock: ManualClock
) -> None:
    add_logs(app, task, ["fine", "ERR bad", "fine again"], clock)
    r = client.get(
        f"/api/v1/trials/{task.trial_id}/logs?follow=false&levels=LOG_LEVEL_ERROR&levels=LOG_LEVEL_CRITICAL",
        headers=user,
    )
    assert [ln["message"] for ln in read_stream(r.text)] == ["ERR bad\n"]


def test_trial_logs_more_than_one_batch(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, clock: ManualClock
) -> None:
    add_logs(app, task, [f"l{i}" for i in range(1200)], clock)
    lines = read_stream(client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false", headers=user).text)
    assert len(lines) == 1200
    assert lines[0]["message"] == "l0\n" and lines[-1]["message"] == "l1199\n"


def test_follow_ends_when_the_trial_is_over(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, agent: FakeAgent, clock: ManualClock
) -> None:
    add_logs(app, task, ["a", "b"], clock)
    agent.exit(task.allocation_id, 0)
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=true", headers=user)
    assert r.status_code == 200
    assert [ln["message"] for ln in read_stream(r.text)] == ["a\n", "b\n"]


def test_no_logs_is_an_empty_stream(client: TestClient, user: dict, task: StartedTask) -> None:
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false", headers=user)
    assert r.status_code == 200 and r.text == ""


def test_logs_of_unknown_trial_is_404(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/trials/999/logs?follow=false", headers=user)
    assert r.status_code == 404
    assert "trial 999" in r.json()["message"]


def test_failure_is_logged_for_the_user(client: TestClient, user: dict, task: StartedTask, agent: FakeAgent) -> None:
    agent.exit(task.allocation_id, 2, "bad things")
    lines = read_stream(client.get(f"/api/v1/trials/{task.trial_id}/logs?follow=false", headers=user).text)
    assert any("exited with code 2" in ln["message"] and ln["level"] == "LOG_LEVEL_ERROR" for ln in lines)


@pytest.mark.parametrize("follow", ["false", "true"])
def test_level_filter_finds_lines_far_down_the_log(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, agent: FakeAgent, clock: ManualClock, follow: str
) -> None:
    # more non-matching lines than one batch of the stream, then the one that matters
    add_logs(app, task, [f"step {i}" for i in range(1100)] + ["ERR the real problem"], clock)
    agent.exit(task.allocation_id, 0)  # so a followed stream ends
    r = client.get(f"/api/v1/trials/{task.trial_id}/logs?follow={follow}&levels=LOG_LEVEL_ERROR", headers=user)
    assert [ln["message"] for ln in read_stream(r.text)] == ["ERR the real problem\n"]


def test_log_lines_an_agent_ships_are_stored_whatever_bytes_they_hold(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, clock: ManualClock
) -> None:
    """PostgreSQL refuses NUL and lone surrogates in text; a task may print both (a NUL comes back)."""
    add_logs(app, task, ["a\x00b", "lone \ud800 surrogate", "fine"], clock)
    lines = read_stream(client.get(f"/api/v1/trials/{task.trial_id}/logs", headers=user).text)
    assert [ln["message"] for ln in lines] == ["a\x00b\n", "lone ? surrogate\n", "fine\n"]  # NUL: stored escaped


def test_a_task_log_level_must_be_one_of_determineds(client: TestClient, task: StartedTask) -> None:
    body = {"logs": [{"taskId": task.task_id, "log": "x", "level": "L" * 100}]}
    r = post(client, "/api/v1/task/logs", body, bearer(task.token))
    assert r.status_code == 400
    assert r.json()["fields"][0]["field"] == "logs[0].level"


def test_a_report_past_the_trials_distinct_metric_names_is_refused(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask, monkeypatch: pytest.MonkeyPatch
) -> None:
    """limits.max_metric_names_per_trial counts the names a trial holds over its groups: a report that would
    take it past them is a 400 naming the field and the limit, nothing stored; names it holds go on."""
    url, headers = f"/api/v1/trials/{task.trial_id}/metrics", task_header(task.token)
    r = post(client, url, metrics_body(task.trial_id, 1, {f"m{i}": i for i in range(1001)}), headers)
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "metrics.metrics.avgMetrics", r.text
    assert "1001 distinct metric names, more than the limit of 1000" in r.text
    assert "limits.max_metric_names_per_trial" in r.text
    ctx = app.state.ctx
    monkeypatch.setattr(
        ctx,
        "config",
        ctx.config.model_copy(
            update={"limits": ctx.config.limits.model_copy(update={"max_metric_names_per_trial": 3})}
        ),
    )
    assert post(client, url, metrics_body(task.trial_id, 1, {"loss": 1.0, "acc": 0.5}), headers).status_code == 200
    assert post(client, url, metrics_body(task.trial_id, 2, {"val": 1.0}, "validation"), headers).status_code == 200
    r = post(client, url, metrics_body(task.trial_id, 3, {"loss": 0.9, "lr": 0.1}), headers)
    assert r.status_code == 400 and "4 distinct metric names, more than the limit of 3" in r.text, r.text
    assert f"trial {task.trial_id} has 3 over its groups" in r.text
    assert post(client, url, metrics_body(task.trial_id, 3, {"loss": 0.9, "acc": 0.6}), headers).status_code == 200
    summary = trial(client, user, task.trial_id)["summaryMetrics"]
    assert set(summary["avg_metrics"]) == {"loss", "acc"} and set(summary["validation_metrics"]) == {"val"}
    assert trial(client, user, task.trial_id)["totalBatchesProcessed"] == 3


def test_a_page_of_trials_is_cut_short_past_the_listing_bytes(
    app: FastAPI, client: TestClient, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trials whose summaries are large fill limits.max_listing_bytes before the page's rows: the page is cut
    short (at least one trial), and its endIndex is where det's SDK and the WebUI ask for the next."""
    agent = FakeAgent(app, "agent-pages", slots=2)
    exp = create_experiment(client, user, GRID_CONFIG)
    tasks = sorted(agent.start_all(), key=lambda t: t.trial_id)
    for t in tasks:
        values = {f"metric_{i:03d}": float(i) for i in range(200)}
        assert (
            post(
                client,
                f"/api/v1/trials/{t.trial_id}/metrics",
                metrics_body(t.trial_id, 1, values),
                task_header(t.token),
            ).status_code
            == 200
        )
    url = f"/api/v1/experiments/{exp['id']}/trials"
    whole = client.get(url, headers=user).json()
    assert [t["id"] for t in whole["trials"]] == [t.trial_id for t in tasks]
    ctx = app.state.ctx
    monkeypatch.setattr(
        ctx,
        "config",
        ctx.config.model_copy(update={"limits": ctx.config.limits.model_copy(update={"max_listing_bytes": 30_000})}),
    )
    first = client.get(url, headers=user).json()
    assert [t["id"] for t in first["trials"]] == [tasks[0].trial_id]
    assert (first["pagination"]["endIndex"], first["pagination"]["total"]) == (1, 2)
    rest = client.get(url, params={"offset": 1}, headers=user).json()
    assert [t["id"] for t in rest["trials"]] == [tasks[1].trial_id] and rest["pagination"]["endIndex"] == 2
    agent.close()
