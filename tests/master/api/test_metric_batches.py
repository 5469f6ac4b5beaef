"""Batches of metric reports (POST /api/v1/trials/{id}/metrics/batch): stored in one transaction, each
(trial, group, steps) at most once, in any order, retried or not; bad batches are refused whole with
the field named, and only the task token of the trial's live allocation may send one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from pedl.master.db import models
from pedl.master.services import metric_batches, metric_digests
from tests.master.fakes import GRID_CONFIG, FakeAgent, StartedTask, create_experiment, ctx_of, post, task_header


@pytest.fixture
def tasks(app: FastAPI, client: TestClient, user: dict) -> Iterator[list[StartedTask]]:
    agent = FakeAgent(app, "agent-batches", slots=2)
    create_experiment(client, user, GRID_CONFIG)  # two trials, both running
    started = sorted(agent.start_all(), key=lambda t: t.trial_id)
    assert len(started) == 2
    yield started
    agent.close()


def entry(step: int, loss: float, group: str = "training") -> dict[str, Any]:
    return {"group": group, "stepsCompleted": step, "trialRunId": 1,
            "metrics": {"avgMetrics": {"loss": loss}, "batchMetrics": None}}


def send(client: TestClient, task: StartedTask, reports: list[dict], token: str | None = None) -> Any:
    return post(client, f"/api/v1/trials/{task.trial_id}/metrics/batch", {"reports": reports},
                task_header(token or task.token))


def stored(app: FastAPI, trial_id: int, group: str = "training") -> list[tuple[int, float]]:
    with ctx_of(app).db.session() as s:
        rows = s.execute(select(models.Metric.steps_completed, models.Metric.metrics).where(
            models.Metric.trial_id == trial_id, models.Metric.group == group).order_by(models.Metric.steps_completed))
        return [(step, values["loss"]) for step, values in rows]


def test_a_batch_is_stored_once_in_any_order_and_the_last_of_a_step_wins(app: FastAPI, client: TestClient,
                                                                         tasks: list[StartedTask]) -> None:
    task = tasks[0]
    batch = [entry(3, 0.3), entry(1, 0.1), entry(2, 0.2), entry(3, 0.33), entry(5, 0.5), entry(4, 0.4)]
    r = send(client, task, batch)
    assert r.status_code == 200, r.text
    assert r.json() == {"stored": 5}
    assert stored(app, task.trial_id) == [(1, 0.1), (2, 0.2), (3, 0.33), (4, 0.4), (5, 0.5)]
    # a retry of the same batch (its answer was lost) and a trial replaying steps 4..6 double nothing
    assert send(client, task, batch).status_code == 200
    assert send(client, task, [entry(4, 0.44), entry(5, 0.55), entry(6, 0.6)]).json() == {"stored": 3}
    assert stored(app, task.trial_id) == [(1, 0.1), (2, 0.2), (3, 0.33), (4, 0.44), (5, 0.55), (6, 0.6)]
    with ctx_of(app).db.session() as s:
        trial = s.get(models.Trial, task.trial_id)
        assert trial.total_batches == 6
        # the summary has the batch's last report, as if they had come one by one
        assert trial.summary_metrics["latest_training"] == {"steps_completed": 6, "metrics": {"loss": 0.6},
                                                            "max_steps_completed": 6}
    # the other trial is untouched
    assert stored(app, tasks[1].trial_id) == []


def test_validation_reports_in_a_batch_move_the_searcher(app: FastAPI, client: TestClient,
                                                         tasks: list[StartedTask]) -> None:
    task = tasks[0]
    r = send(client, task, [entry(5, 0.9), entry(5, 0.7, "validation"), entry(10, 0.6), entry(10, 0.4, "validation")])
    assert r.json() == {"stored": 4}
    assert stored(app, task.trial_id, "validation") == [(5, 0.7), (10, 0.4)]
    with ctx_of(app).db.session() as s:
        assert s.get(models.Trial, task.trial_id).best_metric == pytest.approx(0.4)


@pytest.mark.parametrize(("reports", "field"), [
    ([], "reports"),
    ([entry(i, 0.1) for i in range(metric_batches.MAX_REPORTS + 1)], "reports"),
    ([entry(1, 0.1), entry(2, 0.2), {**entry(3, 0.3), "stepsCompleted": -1}], "reports[2].stepsCompleted"),
    ([entry(1, 0.1), {**entry(2, 0.2), "metrics": {"avgMetrics": [1, 2]}}], "reports[1].metrics.avgMetrics"),
    ([entry(1, 0.1), {**entry(2, 0.2), "group": ""}], "reports[1].group"),
    ([{"group": "training", "trialRunId": 1, "metrics": {"avgMetrics": {}}}], "reports[0].stepsCompleted"),
    # values both databases store alike, checked once over the whole batch
    ([entry(1, 0.1), {**entry(2, 0.2), "metrics": {"avgMetrics": {"note": "a\x00b"}}}],
     "reports[1].metrics.avgMetrics.note"),
    ([entry(1, 0.1), {**entry(2, 0.2), "trialRunId": 2**70}], "reports[1].trialRunId"),
])
def test_a_bad_batch_is_refused_whole_with_the_field_named(app: FastAPI, client: TestClient,
                                                           tasks: list[StartedTask], reports: list[dict],
                                                           field: str) -> None:
    r = send(client, tasks[0], reports)
    assert r.status_code == 400, r.text
    assert field in [f["field"] for f in r.json()["fields"]], r.json()
    assert stored(app, tasks[0].trial_id) == []  # the good reports before the bad one are not stored either


def test_only_the_trials_own_task_token_may_send_a_batch(app: FastAPI, client: TestClient, user: dict,
                                                         tasks: list[StartedTask]) -> None:
    mine, other = tasks
    assert send(client, mine, [entry(1, 0.1)], token=other.token).status_code == 403
    r = post(client, f"/api/v1/trials/{mine.trial_id}/metrics/batch", {"reports": [entry(1, 0.1)]}, user)
    assert r.status_code == 403
    assert post(client, "/api/v1/trials/999999/metrics/batch", {"reports": [entry(1, 0.1)]},
                task_header(mine.token)).status_code == 404
    with ctx_of(app).db.session() as s:
        assert s.scalar(select(func.count()).select_from(models.Metric)) == 0


class Recorder:
    def __init__(self) -> None:
        self.added: list[Any] = []

    def add(self, row: Any) -> None:
        self.added.append(row)


@pytest.mark.parametrize(("reached", "steps", "stale_from", "now_reached"), [
    (None, [3, 1, 2, 5, 4], None, 5),  # nothing digested yet: order within the batch does not matter
    (5, [6, 7], None, 7),
    (5, [1, 2, 3, 5, 4], 1, 5),  # a retried batch: the digests are stale from its first step
    (5, [7, 4, 6], 4, 7),  # a trial replaying steps from its checkpoint at 3
])
def test_a_batch_makes_the_digests_stale_from_its_earliest_step_already_reached(
        reached: int | None, steps: list[int], stale_from: int | None, now_reached: int) -> None:
    summary = {} if reached is None else {"latest_training": {"steps_completed": reached}}
    trial = models.Trial(id=7, summary_metrics=summary)
    s = Recorder()
    assert metric_digests.note_reports(s, trial, "training", steps) == now_reached  # type: ignore[arg-type]
    assert [r.from_step for r in s.added] == ([] if stale_from is None else [stale_from])
