"""The metric series' queries on both databases: random series (gaps, ties, missing and non-numeric
values, integers, names SQLite's JSON paths cannot address) answered exactly as the pure downsampler
says, two stored reports of one step read as the later one, trials read in batches, and the reads
going through the index ix_metrics_trial_group_steps."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import insert, text

from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.metrics import series as metric_series
from pedl.master.metrics.downsample import downsample

NAMES = ["loss", "a.b", "a b", "é", 'a"b', "a\\b", "损失", "$", "x[0]"]
ODD = ["NaN", "Infinity", None, True, False, "1.5", {"v": 1}, [1]]


def seed(db: Database, trials: int, experiment_id: int = 1) -> list[int]:
    with db.session() as s:
        if s.get(models.User, 1) is None:
            s.add(models.User(id=1, username="u", password_hash="", created_at=0.0, modified_at=0.0))
            s.flush()
        s.add(
            models.Experiment(
                id=experiment_id,
                name="e",
                owner_id=1,
                state="STATE_ACTIVE",
                config={},
                original_config="",
                resource_pool="default",
                start_time=0.0,
            )
        )
        s.flush()
        rows = [
            models.Trial(
                experiment_id=experiment_id,
                request_id=str(i),
                task_id=f"{experiment_id}.{i}",
                hparams={},
                seed=0,
                state="STATE_RUNNING",
                start_time=0.0,
                summary_metrics={},
            )
            for i in range(trials)
        ]
        s.add_all(rows)
        s.flush()
        return [t.id for t in rows]


def store(db: Database, rows: list[dict[str, Any]]) -> None:
    with db.session() as s:
        s.execute(insert(models.Metric), [{"trial_run_id": 1, "report_time": 0.0, **r} for r in rows])


def answer_of(db: Database, experiment_id: int, **kw: Any) -> dict[tuple[int, str], tuple[list, list, int, bool]]:
    got = metric_series.for_experiment(SimpleNamespace(db=db), experiment_id, **kw)
    return {(s.trial_id, s.name): (s.steps, s.values, s.total, s.downsampled) for s in got.series}


@pytest.mark.parametrize("seed_value", [1, 2, 3])
def test_random_series_are_answered_as_the_downsampler_says(database: Database, seed_value: int) -> None:
    rnd = random.Random(seed_value)
    trial_ids = seed(database, 4)
    expected: dict[tuple[int, str], tuple[list[int], list[float]]] = {}
    rows = []
    for trial_id in trial_ids:
        step = rnd.randint(0, 100)
        for _ in range(rnd.choice([1, 30, 400])):
            step += rnd.choice([1, 1, 2, 50])
            report: dict[str, Any] = {}
            for name in NAMES:
                roll = rnd.random()
                if roll < 0.1:
                    continue  # not reported this time
                value = (
                    rnd.choice(ODD)
                    if roll < 0.2
                    else rnd.choice([rnd.randint(-5, 5), float(rnd.randint(-3, 3)), rnd.uniform(-1e6, 1e6)])
                )
                report[name] = value
                if roll >= 0.2:
                    steps, values = expected.setdefault((trial_id, name), ([], []))
                    steps.append(step)
                    values.append(float(value))
            rows.append({"trial_id": trial_id, "group": "training", "steps_completed": step, "metrics": report})
    rnd.shuffle(rows)  # stored in any order
    store(database, rows)
    store(
        database,
        [
            {
                "trial_id": trial_ids[0],
                "group": "validation",
                "steps_completed": 1,
                "metrics": {name: 99.0 for name in NAMES},
            }
        ],
    )
    for max_points in (2, 7, 50, 1000):
        got = answer_of(database, 1, group="training", names=NAMES, max_points=max_points)
        want = {}
        for key, (steps, values) in expected.items():
            kept = downsample(steps, values, max_points)
            want[key] = (kept[0], kept[1], len(steps), len(steps) > max_points)
        assert got == want, max_points


def test_two_stored_reports_of_one_step_read_as_the_later(database: Database) -> None:
    """metrics.record replaces a step's report; should two be stored anyway (two reports racing),
    the later one is read, whole: a name it lacks is not taken from the earlier one."""
    [trial] = seed(database, 1)
    store(
        database,
        [
            {"trial_id": trial, "group": "training", "steps_completed": 1, "metrics": {"a": 1.0, "b": 1.0}},
            {"trial_id": trial, "group": "training", "steps_completed": 2, "metrics": {"a": 2.0, "b": 2.0}},
            {"trial_id": trial, "group": "training", "steps_completed": 2, "metrics": {"a": 2.5}},
            {"trial_id": trial, "group": "training", "steps_completed": 3, "metrics": {"a": 3.0, "b": 3.0}},
        ],
    )
    got = answer_of(database, 1, group="training", names=["a", "b"], max_points=10)
    assert got == {(trial, "a"): ([1, 2, 3], [1.0, 2.5, 3.0], 3, False), (trial, "b"): ([1, 3], [1.0, 3.0], 2, False)}


def test_trials_are_read_in_batches_and_answered_alike(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    trial_ids = seed(database, 5)
    store(
        database,
        [
            {"trial_id": t, "group": "validation", "steps_completed": step, "metrics": {"m": float(t * 1000 + step)}}
            for t in trial_ids
            for step in range(1, 41)
        ],
    )
    whole = answer_of(database, 1, group="validation", names=["m"], max_points=10)
    monkeypatch.setattr(metric_series, "BATCH_VALUES", 50)  # a batch per trial, or so
    assert answer_of(database, 1, group="validation", names=["m"], max_points=10) == whole
    assert sorted(t for t, _ in whole) == trial_ids


def explain(db: Database, sql: str) -> str:
    prefix = "EXPLAIN QUERY PLAN " if db.is_sqlite else "EXPLAIN "
    with db.read_session() as s:
        return "\n".join(" ".join(str(c) for c in row) for row in s.connection().exec_driver_sql(prefix + sql))


def test_the_reads_go_through_the_index(database: Database) -> None:
    """A trial's reports among many others': found by the index, on both databases (PostgreSQL's
    planner, with statistics, picks it on its own)."""
    trial_ids = seed(database, 60)
    store(
        database,
        [
            {"trial_id": t, "group": g, "steps_completed": step, "metrics": {"loss": 1.0}}
            for t in trial_ids
            for g in ("training", "validation")
            for step in range(100)
        ],
    )
    with database.session() as s:
        s.connection().exec_driver_sql("ANALYZE")
    dialect = "sqlite" if database.is_sqlite else "postgresql"
    with database.read_session() as s:
        bind = s.get_bind()
        query = metric_series.points_query(dialect, trial_ids[:2], "validation", ["loss", "é"])
        sql = str(query.compile(dialect=bind.dialect, compile_kwargs={"literal_binds": True}))
    plan = explain(database, sql)
    print(f"\n{dialect} plan of the series query:\n{plan}")
    assert "ix_metrics_trial_group_steps" in plan
    if database.is_sqlite:  # the index's order is the answer's (PostgreSQL may sort a bitmap scan's rows)
        assert "TEMP B-TREE" not in plan


def test_an_experiment_of_no_trials_and_a_trial_of_no_reports(database: Database) -> None:
    seed(database, 0)
    answer = metric_series.for_experiment(SimpleNamespace(db=database), 1, group="training")
    assert (answer.series, answer.names, answer.trial_count, answer.truncated) == ([], [], 0, False)
    [trial] = seed(database, 1, experiment_id=2)
    answer = metric_series.for_trial(SimpleNamespace(db=database), trial, group="training", names=["loss"])
    assert (answer.series, answer.names) == ([], [])
    with database.read_session() as s:
        assert s.execute(text("SELECT count(*) FROM metrics")).scalar() == 0
