"""A trial's summaryMetrics aggregates as Determined keeps them (avg_metrics, validation_metrics, a
custom group's name): folded per report, rebuilt from the rows when a step is replaced or when a
group's reports predate them; single reports and batches agree."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from pedl.master.db import models
from pedl.master.metrics import summaries as metric_summaries
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, create_experiment, ctx_of, post, task_header


def test_fold_counts_sums_and_keeps_the_last() -> None:
    agg = metric_summaries.fold_all([{"x": 1, "s": "a"}, {"x": 3.5, "s": "b", "b": True}, {"x": -2}])
    assert agg["x"] == {"count": 3, "sum": 2.5, "min": -2, "max": 3.5, "mean": 2.5 / 3, "last": -2, "type": "number"}
    assert agg["s"] == {"count": 2, "last": "b", "type": "string"}
    assert agg["b"] == {"count": 1, "last": True, "type": "boolean"}


def test_a_number_after_an_object_or_a_list_starts_the_arithmetic_afresh() -> None:
    agg = metric_summaries.fold_all([{"x": {"a": 1}, "y": [1, 2]}, {"x": 2, "y": 5}])
    assert agg["x"] == {"count": 1, "sum": 2, "min": 2, "max": 2, "mean": 2.0, "last": 2, "type": "number"}
    assert metric_summaries.fold(None, {"y": [1]})["y"] == {"count": 1, "last": [1], "type": "array"}
    assert metric_summaries.fold(None, {"y": {}})["y"]["type"] == "object"


def test_fold_leaves_its_input_alone_and_takes_json_safe_non_finite_values() -> None:
    first = metric_summaries.fold(None, {"x": 1})
    second = metric_summaries.fold(first, {"x": "Infinity"})
    assert first["x"]["count"] == 1
    assert second["x"] == {
        "count": 2,
        "sum": "Infinity",
        "min": 1,
        "max": "Infinity",
        "mean": "Infinity",
        "last": "Infinity",
        "type": "number",
    }


_VALUES = st.one_of(
    st.integers(-5, 5),
    st.floats(allow_nan=True, allow_infinity=True, width=32),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "text", True, None, [1], {"a": 1}]),
)
_REPORTS = st.lists(st.dictionaries(st.sampled_from(["x", "y", "z"]), _VALUES, max_size=3), max_size=12)


def _same(a: object, b: object) -> bool:
    """Equal, NaN equal to NaN (both folds write a non-finite float as its string, a NaN as "NaN")."""
    return repr(a) == repr(b)


@settings(max_examples=300, deadline=None)
@given(before=_REPORTS, reports=_REPORTS)
def test_fold_all_is_fold_report_by_report(before: list[dict], reports: list[dict]) -> None:
    _assert_fold_all_is_fold(before, reports)


def _assert_fold_all_is_fold(before: list[dict], reports: list[dict]) -> None:
    start = None
    for metrics in before:
        start = metric_summaries.fold(start, metrics)
    expected = start
    for metrics in reports:
        expected = metric_summaries.fold(expected, metrics)
    assert _same(metric_summaries.fold_all(reports, start), expected or {})


_NUMBERS = st.one_of(st.integers(-5, 5), st.floats(-1e6, 1e6), st.sampled_from([0.5, 1, 1.0]))


@settings(max_examples=300, deadline=None)
@given(
    before=_REPORTS,
    width=st.integers(1, 3),
    rows=st.lists(st.lists(_NUMBERS, min_size=3, max_size=3), max_size=12),
    odd=st.one_of(st.none(), st.tuples(st.integers(0, 11), _VALUES)),
)
def test_fold_all_of_uniform_numeric_reports_is_fold_report_by_report(
    before: list[dict], width: int, rows: list[list], odd: tuple | None
) -> None:
    """The batches a training loop sends (the same names, finite numbers), on aggregates of any kind; with
    `odd`, one value of another kind (a NaN, a string, ...) among them."""
    reports = [dict(zip(["x", "y", "z"][:width], row, strict=False)) for row in rows]
    if odd is not None and reports:
        reports[odd[0] % len(reports)]["x"] = odd[1]
    _assert_fold_all_is_fold(before, reports)


@pytest.mark.parametrize(
    ("group", "key"), [("training", "avg_metrics"), ("validation", "validation_metrics"), ("abc", "abc")]
)
def test_the_key_is_determineds(group: str, key: str) -> None:
    assert metric_summaries.key(group) == key


@pytest.fixture
def task(app: FastAPI, client: TestClient, user: dict) -> Iterator[StartedTask]:
    agent = FakeAgent(app, "agent-summaries", slots=1)
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    yield started
    agent.close()


def report(client: TestClient, task: StartedTask, group: str, step: int, value: float) -> None:
    body = {
        "group": group,
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": step,
            "metrics": {"avgMetrics": {"x": value}},
        },
    }
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, task_header(task.token))
    assert r.status_code == 200, r.text


def summary(client: TestClient, user: dict, trial_id: int) -> dict:
    return client.get(f"/api/v1/trials/{trial_id}", headers=user).json()["trial"]["summaryMetrics"]


def test_reports_fold_into_each_groups_aggregates(client: TestClient, user: dict, task: StartedTask) -> None:
    for step in range(1, 11):
        report(client, task, "training", step, float(step))
    report(client, task, "validation", 10, 0.5)
    report(client, task, "abc", 3, 7.0)
    got = summary(client, user, task.trial_id)
    assert got["avg_metrics"]["x"] == {
        "count": 10,
        "sum": 55.0,
        "min": 1.0,
        "max": 10.0,
        "mean": 5.5,
        "last": 10.0,
        "type": "number",
    }
    assert got["validation_metrics"]["x"]["count"] == 1 and got["abc"]["x"]["last"] == 7.0
    report(client, task, "training", 10, 100.0)  # a replaced step: counted once, with its new value
    assert summary(client, user, task.trial_id)["avg_metrics"]["x"] == {
        "count": 10,
        "sum": 145.0,
        "min": 1.0,
        "max": 100.0,
        "mean": 14.5,
        "last": 100.0,
        "type": "number",
    }


def test_a_batch_agrees_with_single_reports(client: TestClient, user: dict, task: StartedTask) -> None:
    reports = [
        {"group": "training", "stepsCompleted": s, "trialRunId": 1, "metrics": {"avgMetrics": {"x": s}}}
        for s in (1, 2, 3)
    ]
    path = f"/api/v1/trials/{task.trial_id}/metrics/batch"
    assert post(client, path, {"reports": reports}, task_header(task.token)).status_code == 200
    assert summary(client, user, task.trial_id)["avg_metrics"]["x"]["count"] == 3
    again = [
        {**reports[2], "metrics": {"avgMetrics": {"x": 30}}},
        {"group": "training", "stepsCompleted": 4, "trialRunId": 1, "metrics": {"avgMetrics": {"x": 4}}},
    ]
    assert post(client, path, {"reports": again}, task_header(task.token)).status_code == 200
    assert summary(client, user, task.trial_id)["avg_metrics"]["x"] == {
        "count": 4,
        "sum": 37,
        "min": 1,
        "max": 30,
        "mean": 9.25,
        "last": 4,
        "type": "number",
    }


def test_reports_from_before_the_aggregates_are_read_back_once(
    app: FastAPI, client: TestClient, user: dict, task: StartedTask
) -> None:
    report(client, task, "training", 1, 1.0)
    report(client, task, "training", 2, 2.0)
    with ctx_of(app).db.session() as s:  # as a trial stored before they were kept
        trial = s.get(models.Trial, task.trial_id)
        trial.summary_metrics = {k: v for k, v in trial.summary_metrics.items() if k != "avg_metrics"}
    report(client, task, "training", 3, 3.0)
    assert summary(client, user, task.trial_id)["avg_metrics"]["x"]["count"] == 3
