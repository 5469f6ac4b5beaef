"""Metric digests in the database (on both databases): the digester folds reports behind the report
path, charts read the digests and the reports after them, a replayed step makes the digests stale
until built again, and names the digests leave out are read from the reports."""

from __future__ import annotations

import math
import random
import time
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, insert, select, update

from pedl.master.db import models
from pedl.master.metrics import digest_queue
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import series as metric_series
from pedl.master.metrics import service as metrics
from pedl.master.metrics.downsample import downsample
from pedl.master.metrics.series_digest import Digest, answer, encode, fold
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, create_experiment, ctx_of, post, task_header


@pytest.fixture
def trials(client: TestClient, user: dict) -> list[int]:
    exp = create_experiment(client, user, GRID_CONFIG)
    return [t["id"] for t in client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=user).json()["trials"]]


def bulk(app: FastAPI, trial_id: int, points: list[tuple[int, dict[str, Any]]], group: str = "training") -> None:
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
        trial = s.get(models.Trial, trial_id)
        summary = dict(trial.summary_metrics or {})
        summary[f"latest_{group}"] = {"steps_completed": points[-1][0], "metrics": points[-1][1]}
        trial.summary_metrics = summary


def record(app: FastAPI, trial_id: int, step: int, values: dict[str, Any], group: str = "training") -> None:
    with ctx_of(app).db.session() as s:
        metrics.record(
            s,
            s.get(models.Trial, trial_id),
            group=group,
            steps_completed=step,
            trial_run_id=1,
            report_time=float(step),
            metrics=values,
        )


def digest_all(app: FastAPI) -> None:
    """The start-up sweep, then passes until nothing waits."""
    ctx = ctx_of(app)
    queue = digest_queue.DigestQueue()
    metric_digests.sweep(ctx.db, queue)
    while metric_digests.digest_pass(ctx.db, queue, budget=7_000):
        pass


def read(
    app: FastAPI, trial_ids: list[int], names: list[str], max_points: int, group: str = "training"
) -> dict[tuple[int, str], list[tuple[int, float]]]:
    with ctx_of(app).db.read_session() as s:
        got = metric_series.read_series(s, trial_ids, group, names, max_points)
    return {(x.trial_id, x.name): list(zip(x.steps, x.values, strict=True)) for x in got}


def expected(points: list[tuple[int, float]], max_points: int) -> list[tuple[int, float]]:
    d = Digest()
    fold(d, points)
    steps, values = answer(d, max_points)
    return list(zip(steps, values, strict=True))


def mark(app: FastAPI, trial_id: int, group: str = "training") -> models.MetricDigestMark | None:
    with ctx_of(app).db.read_session() as s:
        found = s.get(models.MetricDigestMark, (trial_id, group))
        if found is not None:
            s.expunge(found)
        return found


def noisy(n: int, seed: int, every: int = 1) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(step * every, rng.gauss(0, 1)) for step in range(1, n + 1)]


def test_charts_read_the_digests_once_built(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    series = {t: noisy(15_000, t) for t in trials}
    for t, points in series.items():
        bulk(app, t, [(step, {"loss": v, "acc": -v}) for step, v in points])
    before = read(app, trials, ["loss"], 400)  # no digest yet: from the reports
    assert before[(trials[0], "loss")] == list(
        zip(*downsample(*map(list, zip(*series[trials[0]], strict=True)), 400), strict=True)
    )
    digest_all(app)
    assert mark(app, trials[0]).through_step == 15_000
    got = read(app, trials, ["loss", "acc"], 400)
    for t, points in series.items():
        assert got[(t, "loss")] == expected(points, 400)
        assert got[(t, "acc")] == expected([(s, -v) for s, v in points], 400)
    # from the digests, not the reports: a report changed behind the digester's back does not show
    with ctx_of(app).db.session() as s:
        s.execute(update(models.Metric).where(models.Metric.trial_id == trials[0]).values(metrics={"loss": 99.0}))
    assert max(v for _, v in read(app, trials[:1], ["loss"], 400)[(trials[0], "loss")]) < 99.0


def test_reports_after_the_mark_are_read_with_the_digest(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    t = trials[0]
    points = noisy(5_000, 1)
    bulk(app, t, [(s, {"loss": v}) for s, v in points[:4_000]])
    digest_all(app)
    for step, value in points[4_000:4_010]:
        record(app, t, step, {"loss": value})
    assert mark(app, t).through_step == 4_000
    assert read(app, [t], ["loss"], 300)[(t, "loss")] == expected(points[:4_010], 300)
    digest_all(app)
    assert mark(app, t).through_step == 4_010
    assert read(app, [t], ["loss"], 300)[(t, "loss")] == expected(points[:4_010], 300)


def test_a_replayed_step_makes_the_digests_stale_until_built_again(
    app: FastAPI, client: TestClient, trials: list[int]
) -> None:
    t = trials[0]
    points = noisy(3_000, 2)
    bulk(app, t, [(s, {"loss": v}) for s, v in points])
    digest_all(app)
    record(app, t, 1_500, {"loss": 1e6})  # the restarted trial reports step 1,500 again
    replayed = [(s, 1e6 if s == 1_500 else v) for s, v in points]
    got = read(app, [t], ["loss"], 200)[(t, "loss")]
    assert (1_500, 1e6) in got  # at once: the stale digests are not read
    digest_all(app)
    assert read(app, [t], ["loss"], 200)[(t, "loss")] == expected(replayed, 200)
    with ctx_of(app).db.read_session() as s:
        assert s.scalar(select(func.count()).select_from(models.MetricDigestReset)) == 0
    # the restarted run goes on past its checkpoint: steps the digests hold from the first run
    record(app, t, 1_501, {"loss": -1e6})
    assert (1_501, -1e6) in read(app, [t], ["loss"], 200)[(t, "loss")]
    digest_all(app)
    replayed[1_500] = (1_501, -1e6)
    assert read(app, [t], ["loss"], 200)[(t, "loss")] == expected(replayed, 200)


def test_a_new_step_writes_no_reset_and_a_retried_one_does(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    t = trials[0]
    record(app, t, 10, {"loss": 1.0})
    record(app, t, 20, {"loss": 2.0})
    record(app, t, 10, {"loss": 3.0}, group="validation")  # another group's first
    with ctx_of(app).db.read_session() as s:
        assert s.scalar(select(func.count()).select_from(models.MetricDigestReset)) == 0
    record(app, t, 20, {"loss": 2.0})
    with ctx_of(app).db.read_session() as s:
        assert s.execute(select(models.MetricDigestReset.group, models.MetricDigestReset.from_step)).all() == [
            ("training", 20)
        ]


def test_a_long_backlog_is_digested_in_bounded_transactions(
    app: FastAPI, client: TestClient, trials: list[int]
) -> None:
    t = trials[0]
    points = noisy(10_000, 3, every=3)
    bulk(app, t, [(s, {"loss": v}) for s, v in points])
    queue = digest_queue.DigestQueue()
    queue.touch(t, "training")
    assert metric_digests.digest_pass(ctx_of(app).db, queue, budget=4_000) is True
    assert mark(app, t).through_step == 4_000 * 3
    assert read(app, [t], ["loss"], 500)[(t, "loss")] == expected(points, 500)  # digest and tail together
    while metric_digests.digest_pass(ctx_of(app).db, queue, budget=4_000):
        pass
    assert mark(app, t).through_step == 30_000
    assert read(app, [t], ["loss"], 500)[(t, "loss")] == expected(points, 500)


def test_names_past_the_limit_and_values_that_are_not_numbers(
    app: FastAPI, client: TestClient, trials: list[int]
) -> None:
    t = trials[0]
    many = [f"m{i:03}" for i in range(metric_digests.MAX_DIGESTED_NAMES + 6)]
    rows = [
        (step, {**{name: step + i for i, name in enumerate(many)}, "odd": "NaN" if step % 2 else step, "flag": True})
        for step in range(1, 3_001)
    ]
    bulk(app, t, rows)
    digest_all(app)
    assert mark(app, t).complete is False
    with ctx_of(app).db.read_session() as s:
        digested = set(s.scalars(select(models.MetricDigest.name).where(models.MetricDigest.trial_id == t)))
    assert len(digested) == metric_digests.MAX_DIGESTED_NAMES and "flag" not in digested
    last = many[-1]
    assert last not in digested
    got = read(app, [t], [last, "odd", "flag"], 100)
    raw = [(step, float(step + len(many) - 1)) for step in range(1, 3_001)]
    assert got[(t, last)] == list(zip(*downsample(*map(list, zip(*raw, strict=True)), 100), strict=True))
    assert all(step % 2 == 0 and value == step for step, value in got[(t, "odd")])
    assert (t, "flag") not in got


def test_a_short_series_is_whole_from_the_digest(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    t = trials[0]
    points = [(s * 7, math.sin(s)) for s in range(1, 800)]
    bulk(app, t, [(s, {"loss": v}) for s, v in points], group="validation")
    digest_all(app)
    assert mark(app, t, "validation") is not None
    assert read(app, [t], ["loss"], 1000, group="validation")[(t, "loss")] == points


def test_the_sweep_queues_only_what_is_behind(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    bulk(app, trials[0], [(s, {"loss": 1.0}) for s in range(1, 50)])
    bulk(app, trials[1], [(s, {"loss": 1.0}) for s in range(1, 50)], group="validation")
    digest_all(app)
    record(app, trials[1], 60, {"loss": 2.0}, group="validation")
    queue = digest_queue.DigestQueue()
    assert metric_digests.sweep(ctx_of(app).db, queue) == 1
    assert queue.take() == (trials[1], "validation") and queue.take() is None


def test_an_unknown_or_deleted_trial_in_the_queue_is_harmless(
    app: FastAPI, client: TestClient, user: dict, trials: list[int]
) -> None:
    bulk(app, trials[0], [(s, {"loss": 1.0}) for s in range(1, 50)])
    queue = digest_queue.DigestQueue()
    queue.touch(999_999, "training")
    queue.touch(trials[0], "training")
    assert metric_digests.digest_pass(ctx_of(app).db, queue) is False
    assert mark(app, trials[0]).through_step == 49


def test_reports_through_the_api_are_digested_in_the_background(
    client: TestClient, app: FastAPI, user: dict, agent: FakeAgent
) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    for step in range(1, 6):
        body = {
            "group": "validation",
            "metrics": {
                "trialId": task.trial_id,
                "trialRunId": 1,
                "stepsCompleted": step,
                "metrics": {"avgMetrics": {"loss": 1.0 / step}},
            },
        }
        r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, task_header(task.token))
        assert r.status_code == 200, r.text
    deadline = time.monotonic() + 30
    while (found := mark(app, task.trial_id, "validation")) is None or found.through_step < 5:
        assert time.monotonic() < deadline, "the digester did not catch up"
        time.sleep(0.05)
    assert read(app, [task.trial_id], ["loss"], 10, group="validation")[(task.trial_id, "loss")] == [
        (step, 1.0 / step) for step in range(1, 6)
    ]


def test_names_json_paths_cannot_address_are_digested_too(app: FastAPI, client: TestClient, trials: list[int]) -> None:
    t = trials[0]
    names = ["a.b", "é", 'a"b', "损失", "x[0]"]
    points = noisy(2_500, 5)
    bulk(app, t, [(s, {name: v + i for i, name in enumerate(names)}) for s, v in points])
    digest_all(app)
    got = read(app, [t], names, 300)
    for i, name in enumerate(names):
        assert got[(t, name)] == expected([(s, v + i) for s, v in points], 300)


def test_a_mark_moved_between_the_two_reads_is_read_from_the_reports(
    app: FastAPI, client: TestClient, trials: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    t = trials[0]
    points = noisy(3_000, 6)
    bulk(app, t, [(s, {"loss": v}) for s, v in points[:2_990]])
    digest_all(app)
    with ctx_of(app).db.read_session() as s:
        before = metric_digests.load(s, [t], "training", ["loss"])
    for step, value in points[2_990:]:
        record(app, t, step, {"loss": value})
    digest_all(app)  # the digester commits between the read of the digests and the read of the tail
    monkeypatch.setattr(metric_digests, "load", lambda *_: before)
    raw = list(zip(*downsample(*map(list, zip(*points, strict=True)), 300), strict=True))
    assert read(app, [t], ["loss"], 300)[(t, "loss")] == raw


class _Adds:
    """The session `_fold` adds new digests to."""

    def __init__(self) -> None:
        self.added: list[models.MetricDigest] = []

    def add(self, row: models.MetricDigest) -> None:
        self.added.append(row)


def _folded(points: list, held: dict[str, bytes], how: str, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, bool]:
    """The digests and completeness from folding `points` onto `held`: as read back (a name at a time where
    the reports allow, or a value at a time), or as the batch path feeds them (a block)."""
    if how == "by values":
        monkeypatch.setattr(metric_digests, "_uniform_series", lambda *_: None)
    digests = {
        name: models.MetricDigest(trial_id=1, group="training", name=name, data=data) for name, data in held.items()
    }
    if how == "from a block":
        block = digest_queue.block_of([step for step, _ in points], [report for _, report in points])
        series, complete = metric_digests._block_series(block, digests.keys(), True)
    else:
        series, complete = metric_digests._points_series(points, digests, True)  # type: ignore[arg-type]
    s = _Adds()
    metric_digests._fold(s, 1, "training", digests, series)  # type: ignore[arg-type]
    monkeypatch.undo()
    rows = {**{name: row.data for name, row in digests.items()}, **{row.name: row.data for row in s.added}}
    return rows, complete


@pytest.mark.parametrize(
    "kind", ["floats", "ints and floats", "some not finite", "a string", "a name missing", "past the names limit"]
)
def test_reports_of_the_same_names_fold_a_name_at_a_time_into_the_same_digests(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(kind)
    names = [f"m{i}" for i in range(metric_digests.MAX_DIGESTED_NAMES + 1 if kind == "past the names limit" else 4)]
    points = []
    for step in range(1, 400, 3):
        report: dict[str, Any] = {name: rng.uniform(-1, 1) for name in names}
        if kind == "ints and floats" and step % 2:
            report["m0"] = rng.randrange(-5, 5)
        if kind == "some not finite" and step % 7 == 0:
            report["m1"], report["m2"] = math.nan, math.inf
        if kind == "a string" and step == 100:
            report["m3"] = "text"
        if kind == "a name missing" and step == 199:
            del report["m2"]
        points.append((step, report))
    held_digest = Digest()
    fold(held_digest, [(0, 0.5)])
    held = {"m0": encode(held_digest)}
    # the last three go value by value either way (the whole of what they hold must be)
    uniform = metric_digests._uniform_series(points, {"m0": None})  # type: ignore[dict-item]
    assert (uniform is None) == (kind in ("a string", "a name missing", "past the names limit"))
    by_names, complete = _folded(points, held, "by names", monkeypatch)
    by_values, complete_too = _folded(points, held, "by values", monkeypatch)
    from_block, complete_fed = _folded(points, held, "from a block", monkeypatch)
    assert by_names == by_values == from_block and complete == complete_too == complete_fed
    assert set(by_names) >= {"m0", "m1"}
    assert complete is (kind != "past the names limit")
    assert len(by_names) == (metric_digests.MAX_DIGESTED_NAMES if kind == "past the names limit" else 4)
