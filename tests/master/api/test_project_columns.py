"""A project's experiment-table columns (GET /api/v1/projects/{id}/columns: the general ones, hp.* and
<group>.<metric>.<aggregate>) and its metric ranges (GET .../experiments/metric-ranges)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import FakeAgent, bearer, create_experiment, post

CONFIG = """\
name: hp
entrypoint: python train.py
searcher: {name: single, metric: loss, max_length: 10}
hyperparameters:
  flat: 1
  word: abc
  lr: {type: log, minval: -3, maxval: -1, base: 10}
  nest: {sub1: 1, sub2: 2, empty_leaf: {}}
"""


def report(client: TestClient, task, group: str, step: int, metrics: dict) -> None:
    body = {
        "group": group,
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": step,
            "metrics": {"avgMetrics": metrics},
        },
    }
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, bearer(task.token))
    assert r.status_code == 200, r.text


def test_columns_list_hyperparameters_and_metrics(client: TestClient, user: dict, agent: FakeAgent) -> None:
    create_experiment(client, user, CONFIG)
    [task] = agent.start_all()
    report(client, task, "validation", 1, {"telc": 1.0})
    report(client, task, "training", 1, {"loss": 0.5, "note": "text"})
    for query in ("", "?tableType=TABLE_TYPE_EXPERIMENT", "?tableType=TABLE_TYPE_RUN"):
        r = client.get(f"/api/v1/projects/1/columns{query}", headers=user)
        assert r.status_code == 200, r.text
        columns = {c["column"]: c for c in r.json()["columns"]}
        assert {"id", "name", "state", "startTime", "user"} <= columns.keys()
        assert {"hp.flat", "hp.word", "hp.lr", "hp.nest.sub1", "hp.nest.sub2"} <= columns.keys()
        assert not any(c.startswith("hp.nest.empty_leaf") for c in columns)
        assert (columns["hp.flat"]["type"], columns["hp.word"]["type"]) == ("COLUMN_TYPE_NUMBER", "COLUMN_TYPE_TEXT")
        assert columns["hp.lr"]["location"] == "LOCATION_TYPE_HYPERPARAMETERS"
        for agg in ("min", "max", "last", "mean"):
            assert columns[f"validation.telc.{agg}"]["location"] == "LOCATION_TYPE_VALIDATIONS"
            assert columns[f"training.loss.{agg}"]["location"] == "LOCATION_TYPE_TRAINING"
        assert "training.note.min" not in columns  # not a number
    r = client.get("/api/v1/projects/1/columns?tableType=TABLE_TYPE_CHAIRS", headers=user)
    assert r.status_code == 400 and "tableType" in r.json()["message"]
    assert client.get("/api/v1/projects/99/columns", headers=user).status_code == 404


def test_metric_ranges_span_the_projects_trials(client: TestClient, user: dict, app) -> None:
    agent = FakeAgent(app, "agent-2", slots=2)
    try:
        create_experiment(client, user, CONFIG)
        create_experiment(client, user, CONFIG)
        first, second = sorted(agent.start_all(), key=lambda t: t.trial_id)
        report(client, first, "validation", 1, {"loss": 0.2})
        report(client, second, "validation", 1, {"loss": 0.9})
        report(client, second, "training", 1, {"loss": "NaN"})  # not a finite number: no range
        r = client.get("/api/v1/projects/1/experiments/metric-ranges", headers=user)
        assert r.status_code == 200, r.text
        assert r.json()["ranges"] == [{"metricsName": "validation.loss", "min": 0.2, "max": 0.9}]
        assert client.get("/api/v1/projects/99/experiments/metric-ranges", headers=user).status_code == 404
    finally:
        agent.close()


def test_columns_and_ranges_are_bounded_in_bytes_and_say_they_were_cut(
    client: TestClient, user: dict, app, agent: FakeAgent, monkeypatch
) -> None:
    """Past limits.max_listing_bytes the metric columns (and ranges) of the newest trials are kept, the rest
    left out, and `truncated` says so; the general and hyperparameter columns are always there."""
    create_experiment(client, user, CONFIG)
    [task] = agent.start_all()
    report(client, task, "training", 1, {f"metric_{i:04d}": float(i) for i in range(900)})
    ctx = app.state.ctx
    whole = client.get("/api/v1/projects/1/columns", headers=user)
    assert whole.json()["truncated"] is False and len(whole.json()["columns"]) > 3600
    ranges = client.get("/api/v1/projects/1/experiments/metric-ranges", headers=user).json()
    assert ranges["truncated"] is False and len(ranges["ranges"]) == 900
    monkeypatch.setattr(
        ctx,
        "config",
        ctx.config.model_copy(update={"limits": ctx.config.limits.model_copy(update={"max_listing_bytes": 64 * 1024})}),
    )
    r = client.get("/api/v1/projects/1/columns", headers=user)
    assert r.status_code == 200 and r.json()["truncated"] is True
    assert len(r.content) <= 64 * 1024 < len(whole.content)
    names = [c["column"] for c in r.json()["columns"]]
    assert {"id", "hp.flat", "hp.lr"} <= set(names) and any(n.startswith("training.metric_") for n in names)
    r = client.get("/api/v1/projects/1/experiments/metric-ranges", headers=user)
    assert r.json()["truncated"] is True and len(r.content) <= 64 * 1024
    assert 0 < len(r.json()["ranges"]) < 900
