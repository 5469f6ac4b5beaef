"""Determined's metric streams (GET /api/v1/experiments/.../metrics-stream/...): a first message at once,
then only what is new, until the experiment has ended; their bounds, their authorization and their
refusals of bad input."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.clock import ManualClock
from pedl.master.api.metrics_streams import follow
from pedl.master.identity.user_slots import Bound
from pedl.master.metrics import stream_reads as reads
from pedl.master.metrics import streams
from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, post

ASHA_CONFIG = """\
name: asha-exp
entrypoint: python train.py
searcher: {name: adaptive_asha, metric: loss, smaller_is_better: true, max_length: 100, max_trials: 2}
hyperparameters:
  lr: {type: double, minval: 0.1, maxval: 0.2}
"""


class Running:
    """An experiment whose trials run on a fake agent and report as a trial does (POST .../metrics)."""

    def __init__(self, app: FastAPI, client: TestClient, user: dict, config: str = GRID_CONFIG) -> None:
        self.app, self.client, self.user = app, client, user
        self.agent = FakeAgent(app, "agent-1", slots=4)
        self.id = create_experiment(client, user, config)["id"]
        self.tasks: dict[int, StartedTask] = {t.trial_id: t for t in self.agent.start_all()}
        self.trials = sorted(self.tasks)

    def report(self, trial_id: int, step: int, values: dict, group: str = "training") -> None:
        body = {
            "group": group,
            "metrics": {
                "trialId": trial_id,
                "trialRunId": 1,
                "stepsCompleted": step,
                "metrics": {"avgMetrics": values},
            },
        }
        r = post(self.client, f"/api/v1/trials/{trial_id}/metrics", body, bearer(self.tasks[trial_id].token))
        assert r.status_code == 200, r.text

    def end(self) -> None:
        assert post(self.client, f"/api/v1/experiments/{self.id}/kill", None, self.user).status_code == 200
        for task in self.tasks.values():
            self.agent.exit(task.allocation_id, 137, "killed")
        state = self.client.get(f"/api/v1/experiments/{self.id}", headers=self.user).json()["experiment"]["state"]
        assert state == "STATE_CANCELED"


def results(r) -> list[dict]:  # an httpx response
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line)["result"] for line in r.text.splitlines()]


# ---- each stream: the first message, then only what is new, then its end


def test_metric_names_first_then_each_name_once(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user)
    poll = reads.metric_names_poll(app.state.ctx, [exp.id])
    first, ended = poll()
    assert first == {"searcherMetrics": ["loss"], "trainingMetrics": [], "validationMetrics": [], "metricNames": []}
    assert not ended
    a, b = exp.trials
    exp.report(a, 10, {"loss": 0.5, "batches": 10})
    exp.report(b, 10, {"loss": 0.4})
    exp.report(a, 10, {"loss": 0.3, "acc": 0.9}, "validation")
    got, ended = poll()
    assert got["searcherMetrics"] == [] and not ended
    assert got["trainingMetrics"] == ["batches", "loss"] and got["validationMetrics"] == ["acc", "loss"]
    assert {"group": "validation", "name": "acc"} in got["metricNames"] and len(got["metricNames"]) == 4
    exp.report(b, 20, {"loss": 0.2, "epochs": 1})
    exp.report(b, 20, {"custom": 1}, "inference")
    got, _ = poll()
    assert got == {
        "searcherMetrics": [],
        "trainingMetrics": ["epochs"],
        "validationMetrics": [],
        "metricNames": [{"group": "inference", "name": "custom"}, {"group": "training", "name": "epochs"}],
    }
    exp.end()
    got, ended = poll()
    assert ended and got["trainingMetrics"] == [] and got["metricNames"] == []


def test_batches_once_each_across_trials(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user)
    poll = reads.batches_poll(app.state.ctx, exp.id, "training", "loss")
    assert poll() == ({"batches": []}, False)
    a, b = exp.trials
    exp.report(a, 100, {"loss": 0.5})
    exp.report(b, 100, {"loss": 0.5})
    exp.report(b, 200, {"loss": 0.4})
    exp.report(a, 300, {"other": 1})  # not the metric
    exp.report(a, 300, {"loss": 1}, "validation")  # not the group
    assert poll() == ({"batches": [100, 200]}, False)
    assert poll() == ({"batches": []}, False)  # read again (the look-back): nothing sent twice
    exp.report(a, 200, {"loss": 0.3})
    exp.report(a, 400, {"loss": 0.2})
    assert poll() == ({"batches": [400]}, False)
    exp.end()
    assert poll() == ({"batches": []}, True)


def test_trials_snapshot_in_the_window_once_per_report(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user)
    poll = reads.snapshot_poll(app.state.ctx, exp.id, "validation", "acc", streams.Window.around(100, 10))
    assert poll() == ({"trials": []}, False)
    a, b = exp.trials
    exp.report(a, 100, {"acc": 1}, "validation")
    exp.report(b, 50, {"acc": 0.5}, "validation")  # outside the window
    exp.report(b, 95, {"acc": "NaN"}, "validation")  # not a number
    got, _ = poll()
    assert got == {"trials": [{"trialId": a, "hparams": {"lr": 0.1}, "metric": 1.0, "batchesProcessed": 100}]}
    assert isinstance(got["trials"][0]["metric"], float)
    exp.report(b, 110, {"acc": 0.7}, "validation")
    got, _ = poll()
    assert [(t["trialId"], t["batchesProcessed"], t["metric"]) for t in got["trials"]] == [(b, 110, 0.7)]
    exp.end()
    assert poll() == ({"trials": []}, True)


def test_trials_sample_promotes_then_sends_new_points(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user, ASHA_CONFIG)
    poll = reads.sample_poll(
        app.state.ctx, exp.id, "training", "loss", most_trials=1, most_points=1000, low=0, high=2**62
    )
    empty = {"trials": [], "promotedTrials": [], "demotedTrials": []}
    assert poll() == (empty, False)  # ASHA ranks the trials that have validated: none yet
    a, b = exp.trials
    exp.report(a, 10, {"loss": 0.9})
    exp.report(a, 20, {"loss": 0.8})
    exp.report(a, 20, {"loss": 0.8}, "validation")
    got, _ = poll()
    assert got["promotedTrials"] == [a] and got["demotedTrials"] == []
    [trial] = got["trials"]
    assert trial["trialId"] == a and set(trial["hparams"]) == {"lr"}
    assert [(p["batches"], p["values"]) for p in trial["data"]] == [(10, {"loss": 0.9}), (20, {"loss": 0.8})]
    assert trial["data"][0]["time"].endswith("Z")
    assert poll() == (empty, False)  # nothing new
    exp.report(a, 30, {"loss": 0.7})
    got, _ = poll()
    assert got["trials"] == [
        {
            "trialId": a,
            "hparams": None,
            "data": [{"batches": 30, "values": {"loss": 0.7}, "time": got["trials"][0]["data"][0]["time"]}],
        }
    ]
    # b validates further: it takes a's place (max_trials 1)
    exp.report(b, 40, {"loss": 0.6})
    exp.report(b, 40, {"loss": 0.6}, "validation")
    got, _ = poll()
    assert got["promotedTrials"] == [b] and got["demotedTrials"] == [a]
    assert [(t["trialId"], [p["batches"] for p in t["data"]]) for t in got["trials"]] == [(b, [40])]
    exp.end()
    assert poll() == (empty, True)


def test_trials_sample_ranks_other_searchers_by_their_metric(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user)  # grid, loss, smaller is better
    a, b = exp.trials
    exp.report(a, 10, {"loss": 0.9}, "validation")
    exp.report(b, 10, {"loss": 0.1}, "validation")
    with app.state.ctx.db.read_session() as s:
        assert reads.top_trials(s, exp.id, reads.Searcher("grid", "loss", True), 5) == [b, a]
        assert reads.top_trials(s, exp.id, reads.Searcher("grid", "loss", False), 1) == [a]


def test_thin_keeps_the_last_point() -> None:
    points = [streams.Point(i, float(i), "") for i in range(1, 101)]
    kept = streams.thin(points, 10)
    assert len(kept) == 10 and kept[-1].batches == 100 and kept == sorted(kept, key=lambda p: p.batches)
    assert streams.thin(points[:3], 10) == points[:3]


def test_follow_sends_the_first_message_then_each_poll_until_the_end(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    """The loop the routes run: the first message, a poll each period (off the event loop), the end."""
    exp = Running(app, client, user)
    poll = reads.batches_poll(app.state.ctx, exp.id, "training", "loss")
    a, _ = exp.trials
    steps: list[Callable[[], None]] = [
        lambda: exp.report(a, 100, {"loss": 1}),
        lambda: exp.report(a, 200, {"loss": 1}),
        exp.end,
    ]
    waits: list[float] = []

    async def wait(seconds: float) -> None:
        waits.append(seconds)
        steps.pop(0)()

    async def connected() -> bool:
        return False

    async def run() -> list[dict]:
        first = poll()
        return [
            json.loads(line)["result"]
            async for line in follow(poll, first, period=7.0, disconnected=connected, wait=wait)
        ]

    assert asyncio.run(run()) == [{"batches": []}, {"batches": [100]}, {"batches": [200]}, {"batches": []}]
    assert waits == [7.0, 7.0, 7.0]


def test_follow_ends_when_the_client_leaves() -> None:
    polls = []

    def poll() -> tuple[dict, bool]:
        polls.append(1)
        return {"batches": []}, False

    async def gone() -> bool:
        return True

    async def nothing(_: float) -> None:
        return None

    async def run() -> list[str]:
        return [line async for line in follow(poll, poll(), period=1.0, disconnected=gone, wait=nothing)]

    assert len(asyncio.run(run())) == 1 and len(polls) == 1


# ---- over HTTP: an ended experiment's stream is its whole history in one message, then the end


def test_each_route_streams_an_ended_experiment_in_one_message(app: FastAPI, client: TestClient, user: dict) -> None:
    exp = Running(app, client, user)
    a, b = exp.trials
    for t in (a, b):
        exp.report(t, 100, {"loss": 0.5, "batches": 100})
        exp.report(t, 100, {"validation_loss": 0.4, "accuracy": 0.9}, "validation")
    exp.end()
    base = f"/api/v1/experiments/{exp.id}/metrics-stream"
    [names] = results(
        client.get(
            "/api/v1/experiments/metrics-stream/metric-names", params={"ids": exp.id, "period_seconds": 1}, headers=user
        )
    )
    assert names["searcherMetrics"] == ["loss"] and names["trainingMetrics"] == ["batches", "loss"]
    assert names["validationMetrics"] == ["accuracy", "validation_loss"]
    [batches] = results(
        client.get(
            f"{base}/batches", params={"metric_name": "accuracy", "metric_type": "METRIC_TYPE_VALIDATION"}, headers=user
        )
    )
    assert batches == {"batches": [100]}
    [snap] = results(
        client.get(
            f"{base}/trials-snapshot",
            params={"metric_name": "loss", "metric_type": "METRIC_TYPE_TRAINING", "batches_processed": 100},
            headers=user,
        )
    )
    assert sorted(t["trialId"] for t in snap["trials"]) == [a, b]
    [sample] = results(
        client.get(
            f"{base}/trials-sample", params={"metric_name": "loss", "group": "training", "max_trials": 1}, headers=user
        )
    )
    assert len(sample["promotedTrials"]) == 1 and sample["demotedTrials"] == []
    assert app.state.ctx.metric_streams.held() == 0  # each stream gave its slot back


# ---- authorization, bounds and bad input


def test_who_may_read_a_stream(app: FastAPI, client: TestClient, user: dict, admin: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    path = f"/api/v1/experiments/{exp['id']}/metrics-stream/batches?metric_name=loss&metric_type=METRIC_TYPE_TRAINING"
    assert client.get(path).status_code == 401
    assert client.get(path, headers=bearer("garbage")).status_code == 401
    # as GET /api/v1/experiments/{id}: any user may read any experiment
    assert client.get(f"/api/v1/experiments/{exp['id']}", headers=admin).status_code == 200
    assert results(client.get(path, headers=admin)) == [{"batches": []}]
    for url in (path.replace(f"/{exp['id']}/", "/999/"), "/api/v1/experiments/metrics-stream/metric-names?ids=999"):
        r = client.get(url, headers=user)
        assert r.status_code == 404 and "999" in r.text


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/experiments/metrics-stream/metric-names", "ids"),
        ("/api/v1/experiments/metrics-stream/metric-names?ids=abc", "ids"),
        ("/api/v1/experiments/metrics-stream/metric-names?ids=1&ids=0", "ids"),
        ("/api/v1/experiments/metrics-stream/metric-names?" + "&".join(f"ids={i}" for i in range(1, 102)), "ids"),
        ("/api/v1/experiments/metrics-stream/metric-names?ids=1&period_seconds=-1", "period_seconds"),
        ("/api/v1/experiments/metrics-stream/metric-names?ids=1&period_seconds=x", "period_seconds"),
        ("/api/v1/experiments/1/metrics-stream/batches?metric_name=loss", "metric_type"),
        ("/api/v1/experiments/1/metrics-stream/batches?metric_name=loss&metric_type=TRAINING", "metric_type"),
        ("/api/v1/experiments/1/metrics-stream/batches?metric_type=METRIC_TYPE_TRAINING", "metric_name"),
        (
            "/api/v1/experiments/1/metrics-stream/batches?metric_name=l&metric_type=METRIC_TYPE_TRAINING&group=g",
            "group",
        ),
        (
            "/api/v1/experiments/x/metrics-stream/batches?metric_name=l&metric_type=METRIC_TYPE_TRAINING",
            "experiment_id",
        ),
        (
            "/api/v1/experiments/1/metrics-stream/trials-snapshot?metric_name=l&metric_type=METRIC_TYPE_TRAINING"
            "&batches_margin=101",
            "batches_margin",
        ),
        (
            "/api/v1/experiments/1/metrics-stream/trials-sample?metric_name=l&metric_type=METRIC_TYPE_TRAINING"
            "&max_trials=101",
            "max_trials",
        ),
        (
            "/api/v1/experiments/1/metrics-stream/trials-sample?metric_name=l&metric_type=METRIC_TYPE_TRAINING"
            "&max_datapoints=-1",
            "max_datapoints",
        ),
    ],
)
def test_bad_input_is_a_400_naming_the_parameter(client: TestClient, user: dict, url: str, field: str) -> None:
    r = client.get(url, headers=user)
    assert r.status_code == 400, r.text
    assert field in r.text


def test_periods_are_clamped() -> None:
    assert streams.period(None) == streams.period(0) == 30
    assert streams.period(1) == 1 and streams.period(10**6) == streams.MAX_PERIOD


def test_a_user_holds_a_bounded_number_of_streams(app: FastAPI, client: TestClient, user: dict, admin: dict) -> None:
    ctx = app.state.ctx
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    me = client.get("/api/v1/me", headers=user).json()["user"]["id"]
    limit = ctx.config.limits.max_log_follows_per_user
    held = [ctx.metric_streams.take(me, Bound(limit, "x")) for _ in range(limit)]
    url = f"/api/v1/experiments/metrics-stream/metric-names?ids={exp['id']}"
    r = client.get(url, headers=user)
    assert r.status_code == 429 and "limits.max_log_follows_per_user" in r.text
    assert client.get(url, headers=admin).status_code == 200  # another user's are their own
    held[0].release()
    assert results(client.get(url, headers=user))[0]["searcherMetrics"] == ["loss"]
    assert ctx.metric_streams.held(me) == limit - 1
    for slot in held:
        slot.release()


def test_reads_look_back_from_the_last_read(clock: ManualClock) -> None:
    since = reads.Since(clock)
    assert since.take() is None
    clock.advance(100)
    assert since.take() == clock.now() - 100 - streams.REREAD_SECONDS
