"""GET /api/v1/trials/{id}/metrics/csv: a trial's raw reports as CSV, a column per metric name (empty
where a report lacks it), NaN and Infinity as stored, groups in name order and each in step order,
streamed a page at a time; unknown trials 404, a bad group or too many names 400."""

from __future__ import annotations

import csv
import io

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.db import models
from pedl.master.metrics import export as metric_export
from pedl.master.metrics import service as metrics
from tests.master.fakes import SINGLE_CONFIG, create_experiment, ctx_of

FIXED = ["trial_id", "trial_run_id", "group", "steps_completed", "report_time"]


@pytest.fixture
def trial_id(client: TestClient, user: dict) -> int:
    exp = create_experiment(client, user, SINGLE_CONFIG)
    [trial] = client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]
    return trial["id"]


def report(app: FastAPI, trial_id: int, step: int, values: dict, group: str = "training", run: int = 1) -> None:
    with ctx_of(app).db.session() as s:
        metrics.record(
            s,
            s.get(models.Trial, trial_id),
            group=group,
            steps_completed=step,
            trial_run_id=run,
            report_time=1_700_000_000.0 + step,
            metrics=values,
        )


def export(client: TestClient, headers: dict, trial_id: int, **params) -> tuple[list[list[str]], str]:
    r = client.get(f"/api/v1/trials/{trial_id}/metrics/csv", params=params, headers=headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/csv")
    return list(csv.reader(io.StringIO(r.text))), r.headers["content-disposition"]


def test_every_group_with_a_column_per_name(app: FastAPI, client: TestClient, user: dict, trial_id: int) -> None:
    report(app, trial_id, 20, {"loss": 0.25, "lr": 3})
    report(app, trial_id, 10, {"loss": float("nan"), "grad": float("inf"), "low": float("-inf")}, run=2)
    report(
        app,
        trial_id,
        10,
        {"acc": 0.5, "cm": {"tp": 1, "fp": [2, 3]}, "ok": True, "none": None, "note": 'a,"b"'},
        group="validation",
    )
    report(app, trial_id, 5, {"tokens": 7}, group="custom group")
    rows, disposition = export(client, user, trial_id)
    assert disposition == f'attachment; filename="trial-{trial_id}-all-metrics.csv"'
    names = ["acc", "cm", "grad", "loss", "low", "lr", "none", "note", "ok", "tokens"]
    assert rows[0] == FIXED + names
    got = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    assert [(r["group"], r["steps_completed"]) for r in got] == [
        ("custom group", "5"),
        ("training", "10"),
        ("training", "20"),
        ("validation", "10"),
    ]
    custom, nan, plain, val = got
    assert custom["tokens"] == "7" and custom["loss"] == "" and custom["trial_id"] == str(trial_id)
    assert (nan["loss"], nan["grad"], nan["low"], nan["lr"]) == ("NaN", "Infinity", "-Infinity", "")
    assert (nan["trial_run_id"], plain["trial_run_id"]) == ("2", "1")
    assert (plain["loss"], plain["lr"], plain["grad"]) == ("0.25", "3", "")
    assert plain["report_time"] == "2023-11-14T22:13:40Z"
    assert (val["acc"], val["cm"], val["ok"], val["none"], val["note"]) == (
        "0.5",
        '{"tp":1,"fp":[2,3]}',
        "true",
        "",
        'a,"b"',
    )


def test_the_csv_module_quotes_what_needs_it(app: FastAPI, client: TestClient, user: dict, trial_id: int) -> None:
    report(app, trial_id, 1, {'a,"b"': "x\ny"})
    r = client.get(f"/api/v1/trials/{trial_id}/metrics/csv", headers=user)
    assert r.text.splitlines()[0].endswith(',"a,""b"""')
    assert list(csv.reader(io.StringIO(r.text)))[1][-1] == "x\ny"


def test_one_group(app: FastAPI, client: TestClient, user: dict, trial_id: int) -> None:
    for step in (3, 1, 2):
        report(app, trial_id, step, {"loss": step} if step != 2 else {"acc": 1})
    report(app, trial_id, 2, {"val": 1.5}, group="validation")
    rows, disposition = export(client, user, trial_id, group="training")
    assert disposition == f'attachment; filename="trial-{trial_id}-training-metrics.csv"'
    assert rows[0] == [*FIXED, "acc", "loss"]
    assert [(r[2], r[3], r[5], r[6]) for r in rows[1:]] == [
        ("training", "1", "", "1"),
        ("training", "2", "1", ""),
        ("training", "3", "", "3"),
    ]
    assert export(client, user, trial_id, group="nothing")[0] == [FIXED]  # a group with no reports: a header
    odd = export(client, user, trial_id, group="a/b c")[1]
    assert odd == f'attachment; filename="trial-{trial_id}-a_b_c-metrics.csv"'


def test_a_trial_without_reports_is_a_header(client: TestClient, user: dict, trial_id: int) -> None:
    assert export(client, user, trial_id) == ([FIXED], f'attachment; filename="trial-{trial_id}-all-metrics.csv"')


def test_many_reports_stream_a_page_at_a_time(
    app: FastAPI, client: TestClient, user: dict, trial_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Steps of two reports (the rare race metrics.record allows) and one of ten, more than a page:
    pages end inside steps, and every report is read once, in (step, id) order, a page per read."""

    def step_of(i: int) -> int:
        return i // 2 if i < 40 else 20

    with ctx_of(app).db.session() as s:  # ids in this order: within a step, the larger i first
        s.add_all(
            models.Metric(
                trial_id=trial_id,
                trial_run_id=1,
                group=group,
                steps_completed=step_of(i),
                report_time=1_700_000_000.0,
                metrics={"i": i, f"only_{i % 3}": 1},
            )
            for group in ("validation", "training")
            for i in reversed(range(50))
        )
    reads: list[int] = []
    real = metric_export._pages

    def counted(*args, **kwargs):
        for page in real(*args, **kwargs):
            reads.append(len(page))
            yield page

    monkeypatch.setattr(metric_export, "PAGE", 7)
    monkeypatch.setattr(metric_export, "_pages", counted)
    rows, _ = export(client, user, trial_id)
    assert rows[0] == [*FIXED, "i", "only_0", "only_1", "only_2"]
    body = rows[1:]
    assert [r[2] for r in body] == ["training"] * 50 + ["validation"] * 50
    expected = sorted(range(50), key=lambda i: (step_of(i), -i))
    for group_rows in (body[:50], body[50:]):
        assert [(int(r[3]), int(r[5])) for r in group_rows] == [(step_of(i), i) for i in expected]
    assert all(0 < n <= 7 for n in reads) and len(reads) >= 4 * 8, reads  # names and rows of each group
    assert sum(reads) == 4 * 50


def test_reports_stored_after_the_export_began_wait_for_the_next(
    app: FastAPI, client: TestClient, trial_id: int, user: dict
) -> None:
    """The header is written before the rows are read: a report stored in between (a running trial)
    is left out, not written with a name the header lacks."""
    report(app, trial_id, 1, {"loss": 1})
    ctx = ctx_of(app)
    plan = metric_export.plan(ctx, trial_id, None)
    report(app, trial_id, 2, {"loss": 2, "new": 1})
    report(app, trial_id, 1, {"loss": 0.5}, group="validation")
    assert [row for page in metric_export.pages(ctx, plan) for row in page] == [
        (1, "training", 1, 1_700_000_001.0, {"loss": 1})
    ]
    assert plan.names == ["loss"]


def test_too_many_names_is_a_400_before_anything_is_sent(
    app: FastAPI, client: TestClient, user: dict, trial_id: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metric_export, "MAX_COLUMNS", 3)
    report(app, trial_id, 1, {"a": 1, "b": 2})
    report(app, trial_id, 2, {"c": 3}, group="validation")
    assert export(client, user, trial_id)[0][0] == [*FIXED, "a", "b", "c"]  # three: the limit
    report(app, trial_id, 3, {"d": 4}, group="validation")
    r = client.get(f"/api/v1/trials/{trial_id}/metrics/csv", headers=user)
    assert r.status_code == 400 and r.json()["message"] == (
        f"group: trial {trial_id}'s reports name more than 3 metrics, the most an export has columns for; "
        "export one group at a time"
    )
    r = client.get(f"/api/v1/trials/{trial_id}/metrics/csv", params={"group": "validation"}, headers=user)
    assert r.status_code == 200, r.text
    report(app, trial_id, 4, {"e": 4, "f": 5}, group="validation")
    r = client.get(f"/api/v1/trials/{trial_id}/metrics/csv", params={"group": "validation"}, headers=user)
    assert r.status_code == 400 and r.json()["message"].startswith(
        f"group: trial {trial_id}'s reports of group 'validation' name more than 3 metrics"
    )


@pytest.mark.parametrize(
    ("trial", "params", "status", "text"),
    [
        (999, {}, 404, "trial 999 not found"),
        (None, {"group": ""}, 400, "group"),
        (None, {"group": "g" * 65}, 400, "group"),
        ("x", {}, 400, "trial_id"),
    ],
)
def test_bad_requests_name_the_problem(
    client: TestClient, user: dict, trial_id: int, trial: object, params: dict, status: int, text: str
) -> None:
    r = client.get(f"/api/v1/trials/{trial_id if trial is None else trial}/metrics/csv", params=params, headers=user)
    assert r.status_code == status and text in r.json()["message"], r.text


def test_reading_needs_a_login(client: TestClient, trial_id: int) -> None:
    assert client.get(f"/api/v1/trials/{trial_id}/metrics/csv").status_code == 401
