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
from pedl.master.metrics import batches as metric_batches
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import service as metrics
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
    return {
        "group": group,
        "stepsCompleted": step,
        "trialRunId": 1,
        "metrics": {"avgMetrics": {"loss": loss}, "batchMetrics": None},
    }


def send(client: TestClient, task: StartedTask, reports: list[dict], token: str | None = None) -> Any:
    return post(
        client, f"/api/v1/trials/{task.trial_id}/metrics/batch", {"reports": reports}, task_header(token or task.token)
    )


def stored(app: FastAPI, trial_id: int, group: str = "training") -> list[tuple[int, float]]:
    with ctx_of(app).db.session() as s:
        rows = s.execute(
            select(models.Metric.steps_completed, models.Metric.metrics)
            .where(models.Metric.trial_id == trial_id, models.Metric.group == group)
            .order_by(models.Metric.steps_completed)
        )
        return [(step, values["loss"]) for step, values in rows]


def test_a_batch_is_stored_once_in_any_order_and_the_last_of_a_step_wins(
    app: FastAPI, client: TestClient, tasks: list[StartedTask]
) -> None:
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
        assert trial.summary_metrics["latest_training"] == {
            "steps_completed": 6,
            "metrics": {"loss": 0.6},
            "max_steps_completed": 6,
        }
    # the other trial is untouched
    assert stored(app, tasks[1].trial_id) == []


def test_validation_reports_in_a_batch_move_the_searcher(
    app: FastAPI, client: TestClient, tasks: list[StartedTask]
) -> None:
    task = tasks[0]
    r = send(client, task, [entry(5, 0.9), entry(5, 0.7, "validation"), entry(10, 0.6), entry(10, 0.4, "validation")])
    assert r.json() == {"stored": 4}
    assert stored(app, task.trial_id, "validation") == [(5, 0.7), (10, 0.4)]
    with ctx_of(app).db.session() as s:
        assert s.get(models.Trial, task.trial_id).best_metric == pytest.approx(0.4)


@pytest.mark.parametrize(
    ("reports", "field"),
    [
        ([], "reports"),
        ([entry(i, 0.1) for i in range(metric_batches.MAX_REPORTS + 1)], "reports"),
        ([entry(1, 0.1), entry(2, 0.2), {**entry(3, 0.3), "stepsCompleted": -1}], "reports[2].stepsCompleted"),
        ([entry(1, 0.1), {**entry(2, 0.2), "metrics": {"avgMetrics": [1, 2]}}], "reports[1].metrics.avgMetrics"),
        ([entry(1, 0.1), {**entry(2, 0.2), "group": ""}], "reports[1].group"),
        ([{"group": "training", "trialRunId": 1, "metrics": {"avgMetrics": {}}}], "reports[0].stepsCompleted"),
        # values both databases store alike, checked once over the whole batch
        (
            [entry(1, 0.1), {**entry(2, 0.2), "metrics": {"avgMetrics": {"note": "a\x00b"}}}],
            "reports[1].metrics.avgMetrics.note",
        ),
        ([entry(1, 0.1), {**entry(2, 0.2), "trialRunId": 2**70}], "reports[1].trialRunId"),
    ],
)
def test_a_bad_batch_is_refused_whole_with_the_field_named(
    app: FastAPI, client: TestClient, tasks: list[StartedTask], reports: list[dict], field: str
) -> None:
    r = send(client, tasks[0], reports)
    assert r.status_code == 400, r.text
    assert field in [f["field"] for f in r.json()["fields"]], r.json()
    assert stored(app, tasks[0].trial_id) == []  # the good reports before the bad one are not stored either


def test_only_the_trials_own_task_token_may_send_a_batch(
    app: FastAPI, client: TestClient, user: dict, tasks: list[StartedTask]
) -> None:
    mine, other = tasks
    assert send(client, mine, [entry(1, 0.1)], token=other.token).status_code == 403
    r = post(client, f"/api/v1/trials/{mine.trial_id}/metrics/batch", {"reports": [entry(1, 0.1)]}, user)
    assert r.status_code == 403
    assert (
        post(
            client, "/api/v1/trials/999999/metrics/batch", {"reports": [entry(1, 0.1)]}, task_header(mine.token)
        ).status_code
        == 404
    )
    with ctx_of(app).db.session() as s:
        assert s.scalar(select(func.count()).select_from(models.Metric)) == 0


class Recorder:
    def __init__(self) -> None:
        self.added: list[Any] = []

    def add(self, row: Any) -> None:
        self.added.append(row)


@pytest.mark.parametrize(
    ("reached", "steps", "stale_from", "now_reached"),
    [
        (None, [3, 1, 2, 5, 4], None, 5),  # nothing digested yet: order within the batch does not matter
        (5, [6, 7], None, 7),
        (5, [1, 2, 3, 5, 4], 1, 5),  # a retried batch: the digests are stale from its first step
        (5, [7, 4, 6], 4, 7),  # a trial replaying steps from its checkpoint at 3
    ],
)
def test_a_batch_makes_the_digests_stale_from_its_earliest_step_already_reached(
    reached: int | None, steps: list[int], stale_from: int | None, now_reached: int
) -> None:
    summary = {} if reached is None else {"latest_training": {"steps_completed": reached}}
    trial = models.Trial(id=7, summary_metrics=summary)
    s = Recorder()
    assert metric_digests.note_reports(s, trial, "training", steps) == now_reached  # type: ignore[arg-type]
    assert [r.from_step for r in s.added] == ([] if stale_from is None else [stale_from])


def nested(depth: int) -> Any:
    """A value of `depth` levels, lists and objects in turn."""
    deep: Any = 0.5
    for level in range(depth):
        deep = [deep, 1] if level % 2 else {"k": deep}
    return deep


@pytest.mark.parametrize("depth", [3, metrics.MAX_VALUE_DEPTH])
@pytest.mark.parametrize("steps", [(1, 2), (1, 3, 4)])  # evenly spaced or not: the two INSERTs on SQLite
def test_values_of_every_kind_are_stored_as_sent(
    app: FastAPI, client: TestClient, tasks: list[StartedTask], depth: int, steps: tuple[int, ...]
) -> None:
    """What the general body path accepts, down to a value nested as deep as a metric may be (the batch is
    stored as one JSON document on SQLite)."""
    ctx_of(app).config.limits.max_nesting_depth = 1000
    deep = nested(depth)
    values = {
        "loss": 0.25,
        "quote": 'a "b" \\ c\n\t',
        "text": "\u00e9t\u00e9 \U0001f600",
        "nan": "NaN",
        "inf": "-Infinity",
        "big": 2**63 - 1,
        "small": -(2**63),
        "yes": True,
        "none": None,
        "tiny": 1e-300,
        "object": {"k": [1, {"x": 2.5}]},
        "deep": deep,
    }
    reports = [
        {**entry(steps[0], 0.1), "metrics": {"avgMetrics": values, "batchMetrics": []}},
        *(entry(step, step / 10) for step in steps[1:]),
    ]
    r = send(client, tasks[0], reports)
    assert r.status_code == 200, r.text[:300]
    with ctx_of(app).db.session() as s:
        rows = s.execute(
            select(models.Metric.steps_completed, models.Metric.metrics)
            .where(models.Metric.trial_id == tasks[0].trial_id)
            .order_by(models.Metric.steps_completed)
        ).all()
    assert [tuple(row) for row in rows] == [(steps[0], values), *((step, {"loss": step / 10}) for step in steps[1:])]


@pytest.mark.parametrize("route", ["batch", "single"])
def test_a_value_nested_past_the_limit_is_refused_with_its_name(
    app: FastAPI, client: TestClient, tasks: list[StartedTask], route: str
) -> None:
    """Deeper than any store of it can encode (a 500 before): refused on both routes, the value named."""
    ctx_of(app).config.limits.max_nesting_depth = 1000
    task, deep = tasks[0], nested(metrics.MAX_VALUE_DEPTH + 1)
    if route == "batch":
        r = send(client, task, [{**entry(1, 0.1), "metrics": {"avgMetrics": {"loss": 0.1, "deep": deep}}}])
        field = "reports[0].metrics.avgMetrics.deep"
    else:
        r = post(
            client,
            f"/api/v1/trials/{task.trial_id}/metrics",
            {
                "group": "training",
                "metrics": {
                    "trialId": task.trial_id,
                    "trialRunId": 1,
                    "stepsCompleted": 1,
                    "metrics": {"avgMetrics": {"deep": deep}},
                },
            },
            task_header(task.token),
        )
        field = "metrics.metrics.avgMetrics.deep"
    assert r.status_code == 400, r.text[:300]
    assert r.json()["fields"][0]["field"] == field
    assert f"nested more than {metrics.MAX_VALUE_DEPTH} levels" in r.json()["message"]
    assert stored(app, task.trial_id) == []


@pytest.mark.parametrize(
    ("steps", "groups"),
    [
        ([10, 13, 16, 19], ["training"] * 4),  # evenly spaced, one group: only the values go through JSON
        ([7], ["training"]),
        ([1, 2, 4, 5], ["training"] * 4),  # not evenly spaced: whole rows
        ([1, 2, 3, 4], ["training", "validation", "training", "validation"]),
        ([9, 8, 7], ["training"] * 3),
    ],
)
def test_every_row_of_a_batch_is_stored_with_its_step_group_and_run(
    app: FastAPI, client: TestClient, tasks: list[StartedTask], steps: list[int], groups: list[str]
) -> None:
    task = tasks[0]
    reports = [{**entry(step, step / 100, group), "trialRunId": 3} for step, group in zip(steps, groups, strict=True)]
    assert send(client, task, reports).status_code == 200
    with ctx_of(app).db.session() as s:
        M = models.Metric
        rows = s.execute(
            select(M.steps_completed, M.group, M.trial_run_id, M.metrics)
            .where(M.trial_id == task.trial_id)
            .order_by(M.id)
        ).all()
    assert [tuple(row) for row in rows] == [
        (step, group, 3, {"loss": step / 100}) for step, group in zip(steps, groups, strict=True)
    ]


def test_a_batch_past_the_trials_distinct_metric_names_is_refused_whole(
    app: FastAPI, client: TestClient, tasks: list[StartedTask], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the lean path as on the general one: the first report that takes the trial past
    limits.max_metric_names_per_trial is named, and nothing of the batch is stored."""
    task = tasks[0]
    ctx = ctx_of(app)
    monkeypatch.setattr(
        ctx,
        "config",
        ctx.config.model_copy(
            update={"limits": ctx.config.limits.model_copy(update={"max_metric_names_per_trial": 4})}
        ),
    )
    assert send(client, task, [entry(1, 0.1), {**entry(1, 0.1, "validation")}]).status_code == 200  # loss twice
    many = [
        entry(2, 0.2),
        {**entry(3, 0.3), "metrics": {"avgMetrics": {"loss": 0.3, "a": 1}}},
        {**entry(4, 0.4), "metrics": {"avgMetrics": {"b": 1, "c": 2}}},
        entry(5, 0.5),
    ]
    r = send(client, task, many)
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "reports[2].metrics.avgMetrics", r.text
    assert "5 distinct metric names, more than the limit of 4" in r.text and "max_metric_names_per_trial" in r.text
    listed = [{**entry(6, 0.6), "metrics": {"avgMetrics": {"loss": [1, 2]}}}]  # a list: the general path
    assert send(client, task, listed + many).json()["fields"][0]["field"] == "reports[3].metrics.avgMetrics"
    assert stored(app, task.trial_id) == [(1, 0.1)]
    assert send(client, task, many[:2]).status_code == 200  # 4 names: at the limit
    assert send(client, tasks[1], many).status_code == 200  # the other trial's names are its own
