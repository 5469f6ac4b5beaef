"""An experiment's progress over the API: the length its trials completed against the searcher's
total, moved by each report (progress, metrics, completed operation), kept by a paused, killed or
failed experiment, 100% only when COMPLETED; and what a report costs (no scan of the trials)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event

from pedl.master.db import models
from pedl.master.lifecycle import search_progress
from pedl.master.lifecycle.search_progress import share
from pedl.master.workers import metric_digests as digester
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, post


def progress(client: TestClient, headers: dict, exp_id: int) -> float:
    r = client.get(f"/api/v1/experiments/{exp_id}", headers=headers)
    assert r.status_code == 200
    return r.json()["experiment"]["progress"]


def listed_progress(client: TestClient, headers: dict, exp_id: int) -> float:
    listed = client.get("/api/v1/experiments", headers=headers).json()["experiments"]
    return next(e["progress"] for e in listed if e["id"] == exp_id)


def report_progress(client: TestClient, task: StartedTask, fraction: float) -> None:
    r = post(
        client, f"/api/v1/trials/{task.trial_id}/progress", {"progress": fraction, "is_raw": True}, bearer(task.token)
    )
    assert r.status_code == 200, r.text


def report_steps(client: TestClient, task: StartedTask, steps: int, group: str = "training") -> None:
    body = {
        "group": group,
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "metrics": {"avgMetrics": {"loss": 1.0 / steps}},
        },
    }
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, bearer(task.token))
    assert r.status_code == 200, r.text


def state(client: TestClient, headers: dict, exp_id: int) -> str:
    return client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()["experiment"]["state"]


@pytest.fixture
def single(client: TestClient, user: dict, agent: FakeAgent) -> tuple[int, StartedTask]:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    return exp["id"], task


def test_a_trials_reported_progress_is_the_single_searchers_progress(
    client: TestClient, user: dict, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single
    assert progress(client, user, exp_id) == 0.0
    report_progress(client, task, 0.6)
    assert progress(client, user, exp_id) == pytest.approx(0.6)
    assert listed_progress(client, user, exp_id) == pytest.approx(0.6)
    report_progress(client, task, 0.4)  # a smaller report takes nothing back
    assert progress(client, user, exp_id) == pytest.approx(0.6)


def test_batches_reported_in_metrics_count_against_the_target(
    client: TestClient, user: dict, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single  # max_length: 10 batches
    report_steps(client, task, 3)
    assert progress(client, user, exp_id) == pytest.approx(0.3)
    report_steps(client, task, 7, "validation")  # the searcher hears of it and recomputes
    assert progress(client, user, exp_id) == pytest.approx(0.7)
    report_steps(client, task, 60_750)  # past its target: capped at its length
    assert progress(client, user, exp_id) == pytest.approx(1.0)


def test_a_completed_operation_counts_its_length(
    client: TestClient, user: dict, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single
    r = post(
        client,
        f"/api/v1/trials/{task.trial_id}/searcher/completed_operation",
        {"op": {"length": 4}},
        bearer(task.token),
    )
    assert r.status_code == 200
    assert progress(client, user, exp_id) == pytest.approx(0.4)


def test_grid_progress_is_the_sum_of_trial_lengths_against_all_trials(
    client: TestClient, user: dict, app: FastAPI
) -> None:
    exp = create_experiment(client, user, GRID_CONFIG)  # 2 trials of 10 batches
    agent = FakeAgent(app, "agent-2", slots=2)
    try:
        first, second = agent.start_all()
        report_steps(client, first, 5)
        assert progress(client, user, exp["id"]) == pytest.approx(0.25)
        report_progress(client, second, 0.5)
        assert progress(client, user, exp["id"]) == pytest.approx(0.5)
        report_steps(client, first, 10, "validation")
        agent.exit(first.allocation_id, 0)  # it completed: its whole length counts
        assert progress(client, user, exp["id"]) == pytest.approx(0.75)
        agent.exit(second.allocation_id, 0)
        assert state(client, user, exp["id"]) == "STATE_COMPLETED"
        assert progress(client, user, exp["id"]) == 1.0
    finally:
        agent.close()


def test_a_paused_experiment_keeps_its_progress(
    client: TestClient, user: dict, agent: FakeAgent, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single
    report_progress(client, task, 0.6)
    assert post(client, f"/api/v1/experiments/{exp_id}/pause", None, user).status_code == 200
    report_steps(client, task, 6)  # its last report before it checkpoints and leaves
    agent.exit(task.allocation_id, 0)
    assert state(client, user, exp_id) == "STATE_PAUSED"
    assert progress(client, user, exp_id) == pytest.approx(0.6)


def test_a_killed_experiment_keeps_the_progress_it_reached(
    client: TestClient, user: dict, agent: FakeAgent, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single
    report_steps(client, task, 6)
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, user).status_code == 200
    agent.exit(task.allocation_id, -15)
    assert state(client, user, exp_id) == "STATE_CANCELED"
    assert progress(client, user, exp_id) == pytest.approx(0.6)


def test_a_failed_experiment_keeps_the_progress_it_reached(client: TestClient, user: dict, agent: FakeAgent) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG + "max_restarts: 0\n")
    [task] = agent.start_all()
    report_steps(client, task, 3)
    agent.exit(task.allocation_id, 1, "boom")
    assert state(client, user, exp["id"]) == "STATE_ERROR"
    assert progress(client, user, exp["id"]) == pytest.approx(0.3)


def test_a_training_report_does_not_scan_the_experiments_trials_or_metrics(
    client: TestClient, user: dict, app: FastAPI, single: tuple[int, StartedTask], monkeypatch: pytest.MonkeyPatch
) -> None:
    exp_id, task = single
    # the digester reads the reports back in the background, on the same engine: not the report's work (its
    # loop calls the digest_pass it imported)
    monkeypatch.setattr(digester, "digest_pass", lambda *_: None)
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(" ".join(statement.split()).lower())

    engine = app.state.ctx.db.engine
    event.listen(engine, "before_cursor_execute", seen)
    try:
        report_steps(client, task, 2)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert progress(client, user, exp_id) == pytest.approx(0.2)
    assert not [q for q in statements if "from trials where trials.experiment_id" in q], statements
    assert not [q for q in statements if q.startswith("select") and "from metrics" in q], statements


def test_a_nudge_is_not_counted_twice_when_the_searcher_recomputed_in_between(
    client: TestClient, user: dict, app: FastAPI, single: tuple[int, StartedTask]
) -> None:
    exp_id, task = single
    db = app.state.ctx.db
    with db.session() as s:  # a progress report's own transaction ...
        trial = s.get(models.Trial, task.trial_id)
        before = search_progress.before_report(trial)
        trial.summary_metrics = {**trial.summary_metrics, "progress": 0.6}
        nudge = search_progress.measure(s, trial, before)
    assert nudge is not None and nudge.amount == pytest.approx(0.6)
    report_steps(client, task, 2, "validation")  # ... then the searcher moves and counts it ...
    assert progress(client, user, exp_id) == pytest.approx(0.6)
    search_progress.apply(db, nudge)  # ... before the nudge lands
    assert progress(client, user, exp_id) == pytest.approx(0.6)


@pytest.mark.parametrize(
    ("batches", "target", "reported", "by_batches", "expected"),
    [
        (5, 10, None, True, 0.5),
        (5, 10, 0.8, True, 0.8),  # whichever is further
        (60_750, 10, None, True, 1.0),  # never past the target
        (5, 10, None, False, 0.0),  # max_length in epochs: batches say nothing of it
        (5, 10, 0.25, False, 0.25),
        (0, 0, 3.0, True, 1.0),
        (0, 0, float("nan"), True, 0.0),
    ],
)
def test_share(batches: int, target: int, reported: float | None, by_batches: bool, expected: float) -> None:
    assert share(batches, target, reported, by_batches) == pytest.approx(expected)
