"""The batch path hands what it stored to the digester (DigestQueue.feed), which folds it without
reading the reports back, but only when the database holds exactly those reports after the mark: a
report stored by the single-report route, a replayed step or a dropped feed sends it to the reports,
and the digests come out the same either way (on both databases)."""

from __future__ import annotations

import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import event

from pedl.master.db import models
from pedl.master.metrics import digest_queue
from pedl.master.metrics import digests as metric_digests
from pedl.master.metrics import series as metric_series
from pedl.master.metrics.series_digest import Digest, answer, decode, fold
from tests.master.fakes import GRID_CONFIG, FakeAgent, StartedTask, create_experiment, ctx_of, post, task_header


@pytest.fixture
def task(app: FastAPI, client: TestClient, user: dict) -> Iterator[StartedTask]:
    agent = FakeAgent(app, "agent-fed", slots=2)
    create_experiment(client, user, GRID_CONFIG)
    started = sorted(agent.start_all(), key=lambda t: t.trial_id)
    yield started[0]
    agent.close()


@pytest.fixture
def queue(app: FastAPI, client: TestClient) -> digest_queue.DigestQueue:
    """A queue of the test's own: the app's background digester keeps the one it started with."""
    ctx_of(app).digest_queue = fresh = digest_queue.DigestQueue()
    return fresh


def send_batch(client: TestClient, task: StartedTask, points: list[tuple[int, float]]) -> None:
    reports = [
        {
            "group": "training",
            "stepsCompleted": step,
            "trialRunId": 1,
            "metrics": {"avgMetrics": {"loss": value, "note": "text"}, "batchMetrics": []},
        }
        for step, value in points
    ]
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics/batch", {"reports": reports}, task_header(task.token))
    assert r.status_code == 200, r.text


def send_one(client: TestClient, task: StartedTask, step: int, value: float) -> None:
    body = {
        "metrics": {
            "trialId": task.trial_id,
            "trialRunId": 1,
            "stepsCompleted": step,
            "metrics": {"avgMetrics": {"loss": value}, "batchMetrics": []},
        },
        "group": "training",
    }
    r = post(client, f"/api/v1/trials/{task.trial_id}/metrics", body, task_header(task.token))
    assert r.status_code == 200, r.text


def digest(app: FastAPI, queue: digest_queue.DigestQueue) -> list[str]:
    """Passes until nothing waits; -> the statements of this thread that read report values back."""
    reads: list[str] = []
    me = threading.get_ident()

    def watch(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if (
            threading.get_ident() == me
            and statement.lstrip().upper().startswith("SELECT")
            and "metrics.metrics" in statement
        ):
            reads.append(statement)

    engine = ctx_of(app).db.engine
    event.listen(engine, "before_cursor_execute", watch)
    try:
        while metric_digests.digest_pass(ctx_of(app).db, queue):
            pass
    finally:
        event.remove(engine, "before_cursor_execute", watch)
    return reads


def chart(app: FastAPI, trial_id: int, max_points: int = 40) -> list[tuple[int, float]]:
    with ctx_of(app).db.read_session() as s:
        (series,) = metric_series.read_series(s, [trial_id], "training", ["loss"], max_points)
    return list(zip(series.steps, series.values, strict=True))


def from_digest(app: FastAPI, trial_id: int) -> tuple[int, list[tuple[int, float]]]:
    """(the mark's step, the stored digest's answer) for the trial's loss."""
    with ctx_of(app).db.read_session() as s:
        mark = s.get(models.MetricDigestMark, (trial_id, "training"))
        row = s.get(models.MetricDigest, (trial_id, "training", "loss"))
        assert mark is not None and row is not None
        steps, values = answer(decode(row.data), 40)
        return mark.through_step, list(zip(steps, values, strict=True))


def expected(points: list[tuple[int, float]]) -> list[tuple[int, float]]:
    d = Digest()
    fold(d, sorted(points))
    steps, values = answer(d, 40)
    return list(zip(steps, values, strict=True))


def noisy(first: int, n: int, seed: int) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(step, rng.gauss(0, 1)) for step in range(first, first + n)]


def test_batches_are_folded_from_what_was_fed_without_reading_the_reports(
    app: FastAPI, client: TestClient, task: StartedTask, queue: digest_queue.DigestQueue
) -> None:
    points = noisy(1, 1500, seed=1)
    points[700] = (points[700][0], 50.0)  # a spike the digest must keep
    for i in range(0, 1500, 500):
        send_batch(client, task, points[i : i + 500])
    assert digest(app, queue) == []
    through, answered = from_digest(app, task.trial_id)
    assert through == 1500
    assert answered == expected(points)
    assert (701, 50.0) in answered
    # the next batch folds onto the mark, still without a read
    more = noisy(1501, 300, seed=2)
    send_batch(client, task, more)
    assert digest(app, queue) == []
    assert from_digest(app, task.trial_id) == (1800, expected(points + more))
    assert chart(app, task.trial_id) == expected(points + more)


@pytest.mark.parametrize("between", ["single_report", "replayed_steps", "feed_dropped"])
def test_what_was_not_fed_sends_the_digester_to_the_reports_and_the_digests_agree(
    app: FastAPI, client: TestClient, task: StartedTask, queue: digest_queue.DigestQueue, between: str
) -> None:
    first = noisy(1, 400, seed=3)
    send_batch(client, task, first)
    assert digest(app, queue) == []
    stored = dict(first)
    if between == "single_report":  # stored by Determined's route: not fed
        send_one(client, task, 401, 7.0)
        stored[401] = 7.0
        later = noisy(402, 200, seed=4)
    elif between == "replayed_steps":  # a trial restarted from its checkpoint at step 300
        later = noisy(301, 300, seed=5)
    else:  # the feed was over its bound and dropped
        later = noisy(401, 200, seed=6)
        queue._max_fed = 0
    send_batch(client, task, later)
    stored.update(dict(later))
    assert digest(app, queue) != []  # read back
    through, answered = from_digest(app, task.trial_id)
    assert through == max(stored)
    assert answered == expected(list(stored.items()))
    # and once caught up, the next batch is folded from the feed again
    queue._max_fed = digest_queue.MAX_FED
    tail = noisy(max(stored) + 1, 100, seed=7)
    send_batch(client, task, tail)
    stored.update(dict(tail))
    assert digest(app, queue) == []
    assert from_digest(app, task.trial_id)[1] == expected(list(stored.items()))


def test_a_feed_that_lost_its_oldest_blocks_reads_only_those_back(
    app: FastAPI, client: TestClient, task: StartedTask, queue: digest_queue.DigestQueue
) -> None:
    first = noisy(1, 300, seed=8)
    send_batch(client, task, first)
    assert digest(app, queue) == []
    queue._max_per_pair = 250  # the next three batches of 100: the oldest block goes
    later = noisy(301, 300, seed=9)
    for i in range(0, 300, 100):
        send_batch(client, task, later[i : i + 100])
    reads = digest(app, queue)
    assert len(reads) == 1 and "metrics.steps_completed <" in reads[0]  # only what came before the feed
    assert from_digest(app, task.trial_id) == (600, expected(first + later))


def block(steps: range | list[int], report: dict[str, Any] | None = None) -> digest_queue.Block:
    return digest_queue.block_of(list(steps), [report if report is not None else {"loss": 1.0}] * len(steps))


def fed_steps(blocks: list[digest_queue.Block] | None) -> list[int]:
    return [step for b in blocks or [] for step in b[0].tolist()]


def test_the_feed_keeps_the_newest_blocks_of_a_pair_and_drops_pairs_past_the_total() -> None:
    queue = digest_queue.DigestQueue(max_fed=30, max_per_pair=20)
    queue.feed(1, "training", block(range(1, 11)))
    queue.feed(1, "training", block(range(11, 21)))
    queue.feed(1, "training", block(range(21, 26)))  # past the pair's 20: its oldest block goes
    assert fed_steps(queue.claim((1, "training"))) == list(range(11, 26))
    assert queue.claim((1, "training")) is None
    queue.feed(1, "training", block(range(1, 9), {}))
    queue.feed(2, "training", block(range(1, 24)))  # past the total: this pair's feed is dropped, not the other's
    assert queue.claim((2, "training")) is None
    assert fed_steps(queue.claim((1, "training"))) == list(range(1, 9))
    queue.feed(3, "training", block([1]))
    queue.feed(3, "training", None)  # reports it cannot be told: the pair's feed goes
    assert queue.claim((3, "training")) is None
    assert [queue.take() for _ in range(4)] == [(1, "training"), (2, "training"), (3, "training"), None]
    assert len(queue) == 0


def test_a_feed_past_half_of_what_it_may_hold_hurries_the_digester() -> None:
    """Past max_fed a pair's feed is dropped and read back from the database: past half of it, the
    digester is told to make its next pass at once (before its spacing is up)."""
    queue = digest_queue.DigestQueue(max_fed=100)
    woken, hurried = [], []
    queue.set_waker(lambda: woken.append(1), filling=lambda: hurried.append(1))
    queue.feed(1, "training", block(range(1, 51)))
    assert woken == [1] and hurried == []  # 50 held: half, not more
    queue.feed(2, "training", block([1]))
    assert hurried == [1]
    assert queue.claim((1, "training")) is not None and queue.claim((2, "training")) is not None
    queue.feed(1, "training", block([51]))
    assert hurried == [1]  # claimed: nearly empty again


def test_a_block_holds_each_names_finite_numbers_in_report_order() -> None:
    reports = [{"loss": 0.5, "n": 3, "note": "x"}, {"loss": "NaN", "n": True}, {"n": 2.5, "extra": 1}]
    steps, names, values = digest_queue.block_of([5, 6, 7], reports)
    assert steps.tolist() == [5, 6, 7] and names == ("loss", "n", "note", "extra")
    assert [[None if v != v else v for v in row] for row in values.tolist()] == [
        [0.5, None, None],
        [3.0, None, 2.5],
        [None, None, None],
        [None, None, 1.0],
    ]
    uniform = digest_queue.block_of([1, 2], [{"a": 1, "b": 2.5}, {"a": 3, "b": 4.0}])
    assert uniform[1] == ("a", "b") and uniform[2].tolist() == [[1.0, 3.0], [2.5, 4.0]]
