"""Determined's SDK metric streams: every report of the trials' group, as NDJSON pages of
v1MetricsReport (validation values under validation_metrics, others under avg_metrics), trials in the
order given; unknown trials 404, bad ids and too many trials 400."""

from __future__ import annotations

import json

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.db import models
from pedl.master.metrics import reports as metric_reports
from pedl.master.metrics import service as metrics
from tests.master.fakes import GRID_CONFIG, create_experiment, ctx_of


@pytest.fixture
def trials(client: TestClient, user: dict) -> list[int]:
    exp = create_experiment(client, user, GRID_CONFIG)
    return [t["id"] for t in client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]]


def report(app: FastAPI, trial_id: int, step: int, values: dict, group: str) -> None:
    with ctx_of(app).db.session() as s:
        metrics.record(
            s,
            s.get(models.Trial, trial_id),
            group=group,
            steps_completed=step,
            trial_run_id=1,
            report_time=1_700_000_000.0 + step,
            metrics=values,
        )


def stream(client: TestClient, headers: dict, path: str, **params) -> list[list[dict]]:
    r = client.get(f"/api/v1/trials/metrics/{path}", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return [json.loads(line)["result"]["metrics"] for line in r.text.splitlines() if line]


def test_reports_stream_in_pages_in_step_order(
    app: FastAPI, client: TestClient, user: dict, trials: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = trials
    for step in (3, 1, 2):
        report(app, first, step, {"loss": step / 10}, "training")
    report(app, second, 5, {"loss": 0.5}, "training")
    report(app, first, 2, {"acc": 0.9}, "validation")
    monkeypatch.setattr(metric_reports, "PAGE", 2)
    pages = stream(client, user, "trial_metrics", trialIds=[second, first], group="training")
    assert [len(p) for p in pages] == [1, 2, 1]  # trial by trial, two reports a page
    flat = [m for p in pages for m in p]
    assert [(m["trialId"], m["totalBatches"]) for m in flat] == [(second, 5), (first, 1), (first, 2), (first, 3)]
    assert flat[1]["metrics"] == {"avg_metrics": {"loss": 0.1}} and flat[1]["group"] == "training"
    assert flat[1]["endTime"].startswith("2023-11-14T22:13:21")
    [[val]] = stream(client, user, "validation_metrics", trialIds=[first])
    assert val["metrics"] == {"validation_metrics": {"acc": 0.9}} and val["totalBatches"] == 2
    assert [m["totalBatches"] for p in stream(client, user, "training_metrics", trialIds=[first]) for m in p] == [
        1,
        2,
        3,
    ]
    assert stream(client, user, "trial_metrics", trialIds=[first], group="nothing") == []
    # pedl's own startBatches (a TensorBoard's refresh): the reports from that many steps on, in pages too
    later = stream(client, user, "trial_metrics", trialIds=[first, second], group="training", startBatches=2)
    assert [len(p) for p in later] == [2, 1]
    assert [(m["trialId"], m["totalBatches"]) for p in later for m in p] == [(first, 2), (first, 3), (second, 5)]


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"group": "training"}, 400, "trialIds"),
        ({"trialIds": "x", "group": "training"}, 400, "trialIds"),
        ({"trialIds": 1}, 400, "group"),
        ({"trialIds": list(range(1, 1003)), "group": "training"}, 400, "trialIds"),
        ({"trialIds": 1, "group": "training", "startBatches": -1}, 400, "startBatches"),
        ({"trialIds": 999, "group": "training"}, 404, "trial 999"),
    ],
)
def test_bad_requests_name_the_problem(
    client: TestClient, user: dict, trials: list[int], params: dict, status: int, field: str
) -> None:
    r = client.get("/api/v1/trials/metrics/trial_metrics", params=params, headers=user)
    assert r.status_code == status and field in r.json()["message"], r.text


def test_reading_needs_a_login(client: TestClient, trials: list[int]) -> None:
    r = client.get("/api/v1/trials/metrics/trial_metrics", params={"trialIds": trials[0], "group": "training"})
    assert r.status_code == 401
