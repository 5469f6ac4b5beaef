"""Metric retention: which steps thinning keeps (stable, the latest and the first two kept, every k-th of
a regular series), and passes on both databases: only old training reports go, an experiment's own
setting wins, nothing goes by default, deletes come in chunks each with a digest reset so chart reads
stay right, and a pass never needs the cluster lock."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import event, func, insert, select

from pedl.clock import ManualClock
from pedl.config.metrics_retention import DEFAULT_OLDER_THAN, MetricsRetentionConfig
from pedl.master.db import models
from pedl.master.metrics import digest_queue
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import series as metric_series
from pedl.master.workers import metric_retention
from pedl.master.workers.metric_retention import MetricRetention, Retention, kept_steps, retention_for
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, create_experiment, ctx_of

HOUR = 3600.0
MINUTE = 60.0

# -- which steps stay -------------------------------------------------------------------------------


def test_kept_steps_of_a_regular_series() -> None:
    # windows of 5 x 10 steps from step 10: [10, 60) [60, 110) [110, 160) [160, 210); 20 is the second step
    assert kept_steps(range(10, 201, 10), 5) == {10, 20, 60, 110, 160, 200}
    assert kept_steps(range(100, 100_001, 100), 10) == {100, 200, 100_000} | set(range(1100, 100_000, 1000))
    assert kept_steps([7, 3, 3, 9], 2) == {3, 7, 9}  # any order, repeats: first two and the latest
    assert kept_steps([5, 6], 10) == {5, 6}
    assert kept_steps(range(50), 1) == set(range(50))


series = st.lists(st.integers(min_value=0, max_value=5_000), min_size=0, max_size=300)
keep = st.integers(min_value=1, max_value=12)


@given(series, keep)
def test_kept_steps_is_stable(steps: list[int], k: int) -> None:
    once = kept_steps(steps, k)
    assert once <= set(steps)
    assert kept_steps(once, k) == once  # a second pass deletes nothing more


@given(series, keep)
def test_kept_steps_keeps_the_latest_the_first_two_and_each_windows_first(steps: list[int], k: int) -> None:
    kept = kept_steps(steps, k)
    ordered = sorted(set(steps))
    assert set(ordered[:2]) <= kept
    if ordered:
        assert ordered[-1] in kept
    if len(ordered) >= 3 and k > 1:
        width = k * (ordered[1] - ordered[0])
        windows = {(s - ordered[0]) // width for s in ordered}
        assert {(s - ordered[0]) // width for s in kept} == windows  # no window is emptied
        assert len(kept) <= len(windows) + 2


@given(series, keep, st.integers(min_value=0, max_value=300))
def test_thinning_in_passes_keeps_what_thinning_at_once_keeps(steps: list[int], k: int, cut: int) -> None:
    ordered = sorted(set(steps))
    old, new = ordered[:cut], ordered[cut:]
    assert kept_steps(kept_steps(old, k) | set(new), k) == kept_steps(ordered, k)


@given(
    st.integers(min_value=1, max_value=1000),
    st.integers(min_value=1, max_value=50),
    st.integers(min_value=2, max_value=20),
    st.integers(min_value=3, max_value=400),
)
def test_a_regular_series_keeps_every_kth_report(first: int, every: int, k: int, n: int) -> None:
    steps = [first + i * every for i in range(n)]
    expected = {steps[i] for i in range(0, n, k)} | {steps[1], steps[-1]}
    assert kept_steps(steps, k) == expected


def test_what_applies_to_an_experiment() -> None:
    on = MetricsRetentionConfig(keep_every=3, older_than=HOUR)
    assert retention_for(None, {}) is None
    assert retention_for(None, {"metrics_retention": None}) is None
    assert retention_for(on, {"metrics_retention": None}) == Retention(3, HOUR)
    assert retention_for(on, None) == Retention(3, HOUR)
    assert retention_for(MetricsRetentionConfig(keep_every=1, older_than=HOUR), {}) is None
    assert retention_for(on, {"metrics_retention": {"keep_every": 1}}) is None  # the experiment opts out
    assert retention_for(on, {"metrics_retention": {"keep_every": 5, "older_than": "2h"}}) == Retention(5, 2 * HOUR)
    assert retention_for(on, {"metrics_retention": {"keep_every": 5}}) == Retention(5, HOUR)
    assert retention_for(None, {"metrics_retention": {"keep_every": 5}}) == Retention(5, DEFAULT_OLDER_THAN)
    assert retention_for(on, {"metrics_retention": {"keep_every": 0}}) is None  # unreadable: keep everything


# -- passes on the database -------------------------------------------------------------------------


def trials_of(client: TestClient, headers: dict, config: str) -> list[int]:
    exp = create_experiment(client, headers, config)
    return [t["id"] for t in client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=headers).json()["trials"]]


def add_reports(app: FastAPI, trial_id: int, steps: Iterable[int], group: str = "training") -> None:
    """Reports of the steps, step s reported at T0 + s minutes, each with a value of its own."""
    t0 = ctx_of(app).clock.now()
    steps = list(steps)
    with ctx_of(app).db.session() as s:
        s.execute(
            insert(models.Metric),
            [
                {
                    "trial_id": trial_id,
                    "trial_run_id": 1,
                    "group": group,
                    "steps_completed": step,
                    "report_time": t0 + step * MINUTE,
                    "metrics": {"loss": step % 97 / 7, "acc": step},
                }
                for step in steps
            ],
        )
        trial = s.get(models.Trial, trial_id)
        trial.summary_metrics = {
            **(trial.summary_metrics or {}),
            f"latest_{group}": {"steps_completed": steps[-1], "metrics": {"loss": 0.0}},
        }


def steps_of(app: FastAPI, trial_id: int, group: str = "training") -> list[int]:
    M = models.Metric
    with ctx_of(app).db.read_session() as s:
        return list(
            s.scalars(
                select(M.steps_completed).where(M.trial_id == trial_id, M.group == group).order_by(M.steps_completed)
            )
        )


def worker(
    app: FastAPI, master: MetricsRetentionConfig | None, queue: digest_queue.DigestQueue | None = None, **kw: int
) -> MetricRetention:
    """A worker whose digest queue is its own, so that the app's digester does not rebuild behind the test."""
    ctx = ctx_of(app)
    queue = digest_queue.DigestQueue() if queue is None else queue
    return MetricRetention(ctx.db, ctx.clock, master, queue, **{"min_delete": 1, **kw})


def expected(steps: list[int], k: int, old_through: int) -> list[int]:
    """What a pass leaves: the young reports, and of the old ones those thinning keeps."""
    kept = kept_steps(steps, k)
    return [s for s in steps if s in kept or s > old_through]


def test_only_old_training_reports_go(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> None:
    a, b = trials_of(client, user, GRID_CONFIG)
    steps = list(range(10, 3001, 10))  # reported at T0 + 10 min ... T0 + 3000 min
    add_reports(app, a, steps)
    add_reports(app, a, steps, group="validation")
    add_reports(app, a, steps, group="custom")
    add_reports(app, b, range(2001, 2041))  # reported within the last hour below: all young
    clock.advance(2000 * MINUTE + HOUR)  # reports up to step 2000 are an hour old, or older
    retention = worker(app, MetricsRetentionConfig(keep_every=3, older_than=HOUR))
    deleted = retention.run_pass()
    left = expected(steps, 3, 1999)
    assert steps_of(app, a) == left and deleted == len(steps) - len(left)
    assert {10, 20, 40, 1990, 2000} <= set(left) and 30 not in left
    assert steps_of(app, a, "validation") == steps == steps_of(app, a, "custom")  # never touched
    assert steps_of(app, b) == list(range(2001, 2041))
    assert retention.run_pass() == 0  # stable: run again, nothing more
    assert worker(app, MetricsRetentionConfig(keep_every=3, older_than=HOUR)).run_pass() == 0  # nor from scratch
    clock.advance(10_000 * MINUTE)  # now everything is old; the latest report stays
    assert retention.run_pass() > 0
    assert steps_of(app, a) == sorted(kept_steps(steps, 3)) and steps[-1] in steps_of(app, a)
    assert steps_of(app, b) == sorted(kept_steps(range(2001, 2041), 3))


def test_off_by_default_deletes_nothing(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    add_reports(app, trial, range(1, 501))
    clock.advance(1000 * HOUR)
    for master in (None, MetricsRetentionConfig(keep_every=1, older_than=1.0)):
        assert worker(app, master).run_pass() == 0
    assert ctx_of(app).config.metrics_retention is None
    assert steps_of(app, trial) == list(range(1, 501))


def test_an_experiments_own_setting_wins(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> None:
    plain = trials_of(client, user, SINGLE_CONFIG)[0]
    opted_out = trials_of(client, user, SINGLE_CONFIG + "metrics_retention: {keep_every: 1}\n")[0]
    own = trials_of(client, user, SINGLE_CONFIG + "metrics_retention: {keep_every: 4, older_than: 10h}\n")[0]
    inherits = trials_of(client, user, SINGLE_CONFIG + "metrics_retention: {keep_every: 5}\n")[0]
    steps = list(range(1, 1001))
    for trial in (plain, opted_out, own, inherits):
        add_reports(app, trial, steps)
    clock.advance(1120 * MINUTE)  # 2 h old: steps below 1000; 10 h old: steps below 520

    assert worker(app, None).run_pass() > 0  # no master setting: only the experiments' own apply
    assert steps_of(app, plain) == steps == steps_of(app, opted_out)
    assert steps_of(app, own) == expected(steps, 4, 519)
    assert steps_of(app, inherits) == steps  # no older_than of its own and none of the master's: 168h

    worker(app, MetricsRetentionConfig(keep_every=2, older_than=2 * HOUR)).run_pass()
    assert steps_of(app, plain) == expected(steps, 2, 999)
    assert steps_of(app, opted_out) == steps
    assert steps_of(app, own) == expected(steps, 4, 519)
    assert steps_of(app, inherits) == expected(steps, 5, 999)  # its keep_every, the master's older_than


def test_a_changed_setting_applies_at_the_next_pass(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock
) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG + "metrics_retention: {keep_every: 1}\n")
    steps = list(range(1, 301))
    add_reports(app, trial, steps)
    clock.advance(1000 * HOUR)
    retention = worker(app, MetricsRetentionConfig(keep_every=2, older_than=HOUR))
    assert retention.run_pass() == 0
    with ctx_of(app).db.session() as s:  # as continuing the experiment with another config would
        exp = s.get(models.Experiment, s.get(models.Trial, trial).experiment_id)
        exp.config = {**exp.config, "metrics_retention": {"keep_every": 3, "older_than": "1h"}}
    assert retention.run_pass() > 0
    assert steps_of(app, trial) == sorted(kept_steps(steps, 3))


def test_deletes_come_in_chunks_each_with_a_digest_reset(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    steps = list(range(1, 201))
    add_reports(app, trial, steps)
    clock.advance(1000 * HOUR)
    monkeypatch.setattr(metric_retention, "DELETE_CHUNK", 7)
    statements: list[str] = []
    engine = ctx_of(app).db.engine
    listen = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    queue = digest_queue.DigestQueue()
    R = models.MetricDigestReset
    # the resets as the worker writes them: the app's digester may take them up (and delete them) at any time
    resets: list[int] = []
    written = lambda _mapper, _conn, row: resets.append(row.from_step) if row.trial_id == trial else None  # noqa: E731
    event.listen(engine, "before_cursor_execute", listen)
    event.listen(R, "after_insert", written)
    try:
        deleted = worker(app, MetricsRetentionConfig(keep_every=4, older_than=HOUR), queue).run_pass()
    finally:
        event.remove(engine, "before_cursor_execute", listen)
        event.remove(R, "after_insert", written)
    doomed = sorted(set(steps) - kept_steps(steps, 4))
    assert deleted == len(doomed) == len(steps) - len(steps_of(app, trial))
    deletes = [st for st in statements if st.lstrip().upper().startswith("DELETE FROM METRICS")]
    assert len(deletes) == -(-len(doomed) // 7)  # one statement, one transaction, per chunk of 7
    assert sorted(resets) == doomed[::7]  # each chunk's first step
    assert queue.take() == (trial, "training") and queue.take() is None  # the digester is told, once


def test_a_series_waits_for_enough_to_delete(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    steps = list(range(1, 301))
    add_reports(app, trial, steps)
    clock.advance(100 * MINUTE + HOUR)  # steps below 100 are old: 74 of them could go
    master = MetricsRetentionConfig(keep_every=4, older_than=HOUR)
    retention = worker(app, master, min_delete=100)
    assert retention.run_pass() == 0 and steps_of(app, trial) == steps
    clock.advance(100 * MINUTE)  # now about 150 could go
    assert retention.run_pass() == len(steps) - len(expected(steps, 4, 199))
    clock.advance(1000 * HOUR)  # everything old: the rest goes however few
    retention.run_pass()
    assert steps_of(app, trial) == sorted(kept_steps(steps, 4))


def test_a_pass_reads_a_bounded_number_of_rows_and_the_next_goes_on(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock
) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    steps = list(range(5, 5001, 5))
    add_reports(app, trial, steps)
    clock.advance(1000 * HOUR)
    retention = worker(app, MetricsRetentionConfig(keep_every=6, older_than=HOUR), rows_per_trial=150)
    passes = 0
    while retention.run_pass():
        passes += 1
        assert passes < 100
    assert passes >= len(steps) // 150
    assert steps_of(app, trial) == sorted(kept_steps(steps, 6))


def test_reads_in_pages_and_rows_of_one_step_go_or_stay_together(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    steps = list(range(3, 601, 3))
    add_reports(app, trial, steps)
    add_reports(app, trial, steps[::4])  # a second row of every fourth step (two reports raced)
    clock.advance(1000 * HOUR)
    monkeypatch.setattr(metric_retention, "READ_PAGE", 7)  # pages end between two rows of a step too
    worker(app, MetricsRetentionConfig(keep_every=3, older_than=HOUR)).run_pass()
    kept = kept_steps(steps, 3)
    assert steps_of(app, trial) == sorted([s for s in steps if s in kept] + [s for s in steps[::4] if s in kept])


def read(app: FastAPI, trial_id: int) -> dict[str, list[tuple[int, float]]]:
    with ctx_of(app).db.read_session() as s:
        got = metric_series.read_series(s, [trial_id], "training", ["loss", "acc"], 2000)
    return {x.name: list(zip(x.steps, x.values, strict=True)) for x in got}


def stored(app: FastAPI, trial_id: int) -> dict[str, list[tuple[int, float]]]:
    M = models.Metric
    with ctx_of(app).db.read_session() as s:
        rows = s.execute(
            select(M.steps_completed, M.metrics)
            .where(M.trial_id == trial_id, M.group == "training")
            .order_by(M.steps_completed)
        ).all()
    return {name: [(step, float(report[name])) for step, report in rows] for name in ("loss", "acc")}


def digest_all(app: FastAPI) -> None:
    ctx = ctx_of(app)
    queue = digest_queue.DigestQueue()
    metric_digests.sweep(ctx.db, queue)
    while metric_digests.digest_pass(ctx.db, queue):
        pass


def test_chart_reads_match_the_reports_left(app: FastAPI, client: TestClient, user: dict, clock: ManualClock) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    add_reports(app, trial, range(1, 901))
    digest_all(app)
    with ctx_of(app).db.read_session() as s:
        assert s.get(models.MetricDigestMark, (trial, "training")).through_step == 900
    assert read(app, trial) == stored(app, trial)
    clock.advance(600 * MINUTE + HOUR)
    assert worker(app, MetricsRetentionConfig(keep_every=3, older_than=HOUR)).run_pass() > 0
    assert len(stored(app, trial)["loss"]) < 900
    assert read(app, trial) == stored(app, trial)  # before the digests are built again: from the reports
    digest_all(app)
    with ctx_of(app).db.read_session() as s:
        mark = s.get(models.MetricDigestMark, (trial, "training"))
        assert mark is not None and mark.through_step == 900
        assert s.scalar(select(func.count()).select_from(models.MetricDigestReset)) == 0
    assert read(app, trial) == stored(app, trial)  # and from the digests built again


class FailFastLock:
    """The cluster lock, but the test's own thread may not wait for it: it raises instead."""

    def __init__(self, inner: threading.RLock, test_thread: int) -> None:
        self.inner, self.test_thread = inner, test_thread

    def __enter__(self) -> None:
        if threading.get_ident() == self.test_thread:
            if not self.inner.acquire(blocking=False):
                raise AssertionError("metric retention waited for the cluster lock")
        else:
            self.inner.acquire()

    def __exit__(self, *exc: object) -> None:
        self.inner.release()


def test_a_pass_does_not_need_the_cluster_lock(
    app: FastAPI, client: TestClient, user: dict, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    (trial,) = trials_of(client, user, SINGLE_CONFIG)
    steps = list(range(1, 301))
    add_reports(app, trial, steps)
    clock.advance(1000 * HOUR)
    controller = ctx_of(app).controller
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with controller.lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    monkeypatch.setattr(controller, "lock", FailFastLock(controller.lock, threading.get_ident()))
    try:
        with pytest.raises(AssertionError):  # the guard works: the controller's own path would fail here
            controller.run(lambda s: None)
        deleted = worker(app, MetricsRetentionConfig(keep_every=2, older_than=HOUR)).run_pass()
    finally:
        release.set()
        holder.join()
    assert deleted == len(steps) - len(kept_steps(steps, 2))


def test_the_worker_passes_every_interval_until_stopped(app: FastAPI) -> None:
    ctx = ctx_of(app)
    retention = MetricRetention(ctx.db, ctx.clock, MetricsRetentionConfig(keep_every=2, older_than=1.0, interval=0.001))
    passes: list[int] = []

    async def main() -> None:
        stop = asyncio.Event()

        def counted() -> int:
            passes.append(1)
            if len(passes) == 3:
                stop.set()
            return 0

        retention.run_pass = counted  # type: ignore[method-assign]
        await retention.run(stop)

    asyncio.run(main())
    assert len(passes) == 3
    assert MetricRetention(ctx.db, ctx.clock, None).interval == 600.0
