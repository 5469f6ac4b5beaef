"""The metric series the WebUI's charts read, over the API on both databases: a trial's and
an experiment's series, downsampled to at most maxPoints points with each bucket's minimum and
maximum kept, the names filter and listing, values that are not numbers skipped, a replayed step
shown once, bad parameters a 400 naming the parameter, unknown ids a 404, and a 304 while unchanged."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import insert

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.api import metric_series as metric_series_api
from pedl.master.api.errors import routes
from pedl.master.app import create_app
from pedl.master.db import models
from pedl.master.metrics import series as metric_series
from pedl.master.metrics import service as metrics
from pedl.master.metrics.downsample import downsample
from tests.master.fakes import (
    GRID_CONFIG,
    SINGLE_CONFIG,
    FakeAgent,
    create_experiment,
    ctx_of,
    post,
    task_header,
)

GRID_3 = GRID_CONFIG.replace("vals: [0.1, 0.2]", "vals: [0.1, 0.2, 0.3]")


@pytest.fixture
def app(master_config: MasterConfig, clock: ManualClock) -> FastAPI:
    """The master's app with this router, until app.py registers it itself."""
    app = create_app(master_config, clock=clock)
    if not any(r.path_format.endswith("/metric-series") for r in routes(app)):
        app.include_router(metric_series_api.router)
    return app


def report(
    app: FastAPI, trial_id: int, step: int, values: dict[str, Any], group: str = "training", run: int = 1
) -> None:
    """A report stored the way the trial's POST stores it (metrics.record: summary, replaced step)."""
    with ctx_of(app).db.session() as s:
        metrics.record(
            s,
            s.get(models.Trial, trial_id),
            group=group,
            steps_completed=step,
            trial_run_id=run,
            report_time=float(step),
            metrics=values,
        )


def bulk(app: FastAPI, trial_id: int, points: list[tuple[int, dict[str, Any]]], group: str = "training") -> None:
    """Many reports at once, as rows (through the API they would take minutes)."""
    with ctx_of(app).db.session() as s:
        s.execute(
            insert(models.Metric),
            [
                {
                    "trial_id": trial_id,
                    "trial_run_id": 1,
                    "group": group,
                    "steps_completed": step,
                    "report_time": float(step),
                    "metrics": values,
                }
                for step, values in points
            ],
        )


def get(client: TestClient, headers: dict, path: str, **params: Any) -> dict:
    r = client.get(f"/api/v1/{path}/metric-series", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def points(answer: dict, trial_id: int, name: str) -> list[tuple[int, float]]:
    [series] = [s for s in answer["series"] if s["trialId"] == trial_id and s["name"] == name]
    assert len(series["steps"]) == len(series["values"])
    return list(zip(series["steps"], series["values"], strict=True))


@pytest.fixture
def trials(client: TestClient, user: dict) -> list[int]:
    exp = create_experiment(client, user, GRID_CONFIG)
    return [t["id"] for t in client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]]


def test_a_short_series_comes_whole_in_step_order(
    client: TestClient, app: FastAPI, user: dict, trials: list[int]
) -> None:
    trial = trials[0]
    for step, loss in [(30, 0.5), (10, 0.9), (20, 0.7)]:  # reported out of order
        report(app, trial, step, {"loss": loss, "acc": step // 10})
    answer = get(client, user, f"trials/{trial}", group="training", names=["loss", "acc"])
    assert answer == {
        "group": "training",
        "maxPoints": 1000,
        "names": ["acc", "loss"],
        "series": [
            {
                "trialId": trial,
                "name": "loss",
                "steps": [10, 20, 30],
                "values": [0.9, 0.7, 0.5],
                "total": 3,
                "downsampled": False,
            },
            {
                "trialId": trial,
                "name": "acc",
                "steps": [10, 20, 30],
                "values": [1.0, 2.0, 3.0],
                "total": 3,
                "downsampled": False,
            },
        ],
    }
    # maxPoints as large as the series: still whole
    assert points(get(client, user, f"trials/{trial}", group="training", names="loss", maxPoints=3), trial, "loss") == [
        (10, 0.9),
        (20, 0.7),
        (30, 0.5),
    ]


def test_20000_points_keep_the_spike_and_each_buckets_min_and_max(
    client: TestClient, app: FastAPI, user: dict, trials: list[int]
) -> None:
    trial = trials[0]
    values = {step: math.sin(step / 300) for step in range(1, 20_001)}
    values[12_345], values[777] = 1000.0, -1000.0  # a spike and a dip, one point each
    bulk(app, trial, [(step, {"loss": v}) for step, v in values.items()])
    answer = get(client, user, f"trials/{trial}", group="training", names="loss", maxPoints=500)
    [series] = answer["series"]
    assert series["total"] == 20_000 and series["downsampled"] is True
    got = points(answer, trial, "loss")
    assert len(got) <= 500
    assert (12_345, 1000.0) in got and (777, -1000.0) in got
    assert [step for step, _ in got] == sorted({step for step, _ in got})
    # each of the 250 step buckets (80 steps wide here) kept its minimum and its maximum
    for b in range(250):
        bucket = {step: v for step, v in values.items() if (step - 1) * 250 // 20_000 == b}
        kept = {step: v for step, v in got if (step - 1) * 250 // 20_000 == b}
        assert min(kept.values()) == min(bucket.values()) and max(kept.values()) == max(bucket.values())
        assert set(kept) <= set(bucket) and 1 <= len(kept) <= 2
    steps = sorted(values)
    assert got == list(zip(*downsample(steps, [values[s] for s in steps], 500), strict=True))


def test_an_experiment_answers_every_trial(client: TestClient, app: FastAPI, user: dict, trials: list[int]) -> None:
    first, second = trials
    other = create_experiment(client, user, SINGLE_CONFIG)  # its trial must not show
    other_trial = client.get(f"/api/v1/experiments/{other['id']}/trials", headers=user).json()["trials"][0]["id"]
    for step in (5, 10, 15):
        report(app, first, step, {"validation_loss": 1 / step}, group="validation")
        report(app, other_trial, step, {"validation_loss": 7.0}, group="validation")
    report(app, second, 10, {"validation_loss": 0.25, "validation_acc": 0.5}, group="validation")
    report(app, first, 20, {"loss": 0.1})  # training: another group
    exp_id = client.get(f"/api/v1/trials/{first}", headers=user).json()["trial"]["experimentId"]
    answer = get(client, user, f"experiments/{exp_id}", group="validation", names="validation_loss", maxPoints=500)
    assert answer["trialCount"] == 2 and answer["truncated"] is False
    assert answer["names"] == ["validation_acc", "validation_loss"]
    assert [(s["trialId"], s["name"], s["total"]) for s in answer["series"]] == [
        (first, "validation_loss", 3),
        (second, "validation_loss", 1),
    ]
    assert points(answer, first, "validation_loss") == [(5, 0.2), (10, 0.1), (15, 1 / 15)]
    assert points(answer, second, "validation_loss") == [(10, 0.25)]
    # no names: every numeric name
    every = get(client, user, f"experiments/{exp_id}", group="validation")
    assert [(s["trialId"], s["name"]) for s in every["series"]] == [
        (first, "validation_loss"),
        (second, "validation_acc"),
        (second, "validation_loss"),
    ]


def test_an_experiment_past_the_trial_limit_says_so(
    client: TestClient, app: FastAPI, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    exp = create_experiment(client, user, GRID_3)
    ids = [t["id"] for t in client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]]
    for trial in ids:
        report(app, trial, 1, {"loss": float(trial)})
    monkeypatch.setattr(metric_series, "MAX_TRIALS", 2)
    answer = get(client, user, f"experiments/{exp['id']}", group="training")
    assert answer["trialCount"] == 3 and answer["truncated"] is True
    assert [s["trialId"] for s in answer["series"]] == sorted(ids)[:2]


def test_names_filter_and_listing(client: TestClient, app: FastAPI, user: dict, trials: list[int]) -> None:
    trial = trials[0]
    report(app, trial, 1, {"a": 1.0, "b": 2.0, "c": 3.0, "label": "x"})
    report(app, trial, 2, {"a": 1.5, "b": 2.5})
    answer = get(client, user, f"trials/{trial}", group="training", names=["b", "a", "b", "missing"])
    assert [s["name"] for s in answer["series"]] == ["b", "a"]  # as asked, once; none for a name never reported
    assert answer["names"] == ["a", "b", "c", "label"]  # every name seen, numeric or not
    everything = get(client, user, f"trials/{trial}", group="training")
    assert [s["name"] for s in everything["series"]] == ["a", "b", "c"]
    assert points(everything, trial, "c") == [(1, 3.0)]


def test_values_that_are_not_numbers_are_skipped(
    client: TestClient, app: FastAPI, user: dict, trials: list[int]
) -> None:
    trial = trials[0]
    odd: list[Any] = [float("nan"), float("inf"), "NaN", "Infinity", "0.5", None, True, False, {"x": 1}, [1, 2]]
    for step, value in enumerate(odd, start=1):
        report(app, trial, step, {"loss": value, "flag": value})
    report(app, trial, 100, {"loss": 3})  # an integer is a number
    answer = get(client, user, f"trials/{trial}", group="training", names=["loss", "flag"])
    assert [(s["name"], s["steps"], s["values"], s["total"]) for s in answer["series"]] == [("loss", [100], [3.0], 1)]
    assert answer["names"] == ["flag", "loss"]
    assert [s["name"] for s in get(client, user, f"trials/{trial}", group="training")["series"]] == ["loss"]


def test_groups_are_kept_apart(client: TestClient, app: FastAPI, user: dict, trials: list[int]) -> None:
    trial = trials[0]
    report(app, trial, 1, {"loss": 1.0})
    report(app, trial, 1, {"loss": 2.0}, group="validation")
    report(app, trial, 1, {"loss": 3.0}, group="inference")
    for group, value in [("training", 1.0), ("validation", 2.0), ("inference", 3.0)]:
        answer = get(client, user, f"trials/{trial}", group=group, names="loss")
        assert answer["group"] == group and points(answer, trial, "loss") == [(1, value)]
    assert get(client, user, f"trials/{trial}", group="nothing", names="loss")["series"] == []


def test_a_step_replayed_after_a_restart_is_shown_once(client: TestClient, user: dict, agent: FakeAgent) -> None:
    """Through the trial's own POST: run 2 replays step 20 after restoring the checkpoint of step 10."""
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    for run, step, loss in [(1, 10, 0.9), (1, 20, 0.8), (2, 20, 0.7), (2, 30, 0.6)]:
        body = {
            "group": "training",
            "metrics": {
                "trialId": task.trial_id,
                "trialRunId": run,
                "stepsCompleted": step,
                "metrics": {"avgMetrics": {"loss": loss}},
            },
        }
        assert post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, task_header(task.token)).status_code == 200
    answer = get(client, user, f"trials/{task.trial_id}", group="training", names="loss")
    assert points(answer, task.trial_id, "loss") == [(10, 0.9), (20, 0.7), (30, 0.6)]


def test_unknown_trial_and_experiment_are_404(client: TestClient, user: dict) -> None:
    for path, what in [("trials/999", "trial 999"), ("experiments/999", "experiment 999")]:
        r = client.get(f"/api/v1/{path}/metric-series", params={"group": "training"}, headers=user)
        assert r.status_code == 404 and what in r.json()["message"], r.text


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"group": "training", "maxPoints": 1}, "maxPoints"),
        ({"group": "training", "maxPoints": 10_001}, "maxPoints"),
        ({"group": "training", "maxPoints": "many"}, "maxPoints"),
        ({}, "group"),
        ({"group": ""}, "group"),
        ({"group": "g" * 65}, "group"),
        ({"group": "training", "names": ""}, "names"),
        ({"group": "training", "names": "n" * 256}, "names"),
        ({"group": "training", "names": [f"n{i}" for i in range(51)]}, "names"),
    ],
)
@pytest.mark.parametrize("path", ["trials/{trial}", "experiments/{experiment}"])
def test_bad_parameters_are_400_naming_them(
    client: TestClient, user: dict, trials: list[int], path: str, params: dict, field: str
) -> None:
    url = "/api/v1/" + path.format(trial=trials[0], experiment=1) + "/metric-series"
    r = client.get(url, params=params, headers=user)
    assert r.status_code == 400, r.text
    assert [f["field"] for f in r.json()["fields"]] == [field] and field in r.json()["message"], r.text


def test_limits_are_accepted_at_their_edges(client: TestClient, app: FastAPI, user: dict, trials: list[int]) -> None:
    trial = trials[0]
    bulk(app, trial, [(step, {"loss": float(step % 7)}) for step in range(1, 12)])
    # maxPoints 2: one bucket, its minimum (first at step 7) and its maximum (first at step 6)
    two = points(get(client, user, f"trials/{trial}", group="training", names="loss", maxPoints=2), trial, "loss")
    assert two == [(6, 6.0), (7, 0.0)]
    fifty = [f"n{i}" for i in range(49)] + ["loss"]
    answer = get(client, user, f"trials/{trial}", group="training", names=fifty, maxPoints=10_000)
    assert [s["name"] for s in answer["series"]] == ["loss"] and len(points(answer, trial, "loss")) == 11


def test_only_a_logged_in_caller_reads_them(client: TestClient, trials: list[int]) -> None:
    r = client.get(f"/api/v1/trials/{trials[0]}/metric-series", params={"group": "training"})
    assert r.status_code == 401


def test_an_unchanged_view_answers_304(client: TestClient, app: FastAPI, user: dict, trials: list[int]) -> None:
    trial = trials[0]
    report(app, trial, 1, {"loss": 1.0})
    url = f"/api/v1/trials/{trial}/metric-series?group=training"
    first = client.get(url, headers=user)
    etag = first.headers["ETag"]
    assert client.get(url, headers={**user, "If-None-Match": etag}).status_code == 304
    report(app, trial, 2, {"loss": 0.5})
    again = client.get(url, headers={**user, "If-None-Match": etag})
    assert again.status_code == 200 and points(again.json(), trial, "loss") == [(1, 1.0), (2, 0.5)]
