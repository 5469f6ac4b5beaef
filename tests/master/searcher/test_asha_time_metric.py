"""adaptive_asha with Determined 0.38's searcher.time_metric / max_time: rungs laid out over max_time
and reached by the time metric's value in the validation reports, not by their steps; the config's
checks name the field; and through the master, a report's metric decides as its steps did."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.config.experiment_config import parse_experiment_config
from pedl.master.db import models
from tests.master.fakes import FakeAgent, create_experiment, post, task_header
from tests.master.searcher.test_asha import asha, problems

ONE_BRACKET = ("max_trials: 16, time_metric: batches, max_time: 16, mode: aggressive, max_rungs: 3, "
               "max_concurrent_trials: 16")


def test_rungs_are_laid_out_over_max_time() -> None:
    s = asha(ONE_BRACKET)
    assert len(s.initial().create) == 16
    assert s.brackets[0].rung_lengths == (1, 4, 16)


def test_a_rung_is_reached_by_the_time_metric_not_by_the_steps() -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    # many steps, but the time metric says it has not trained a unit yet: no rung
    assert s.on_validation("r0", 0.5, 100, {"loss": 0.5, "batches": 0}).stop == []
    assert s.rungs[0][0] == []
    assert s.on_validation("r0", 0.5, 0, {"loss": 0.5, "batches": 1}).stop == []
    assert s.rungs[0][0] == [["r0", 0.5]]
    stopped = s.on_validation("r1", 0.6, 0, {"loss": 0.6, "batches": 1.5})  # second of two at rung 1
    assert stopped.stop == ["r1"]
    assert s.stop_reasons()["r1"].startswith("stopped at rung 1 of 3 (1 batches, bracket 1 of 1): loss 0.6")
    # one report past two rungs is recorded at each
    assert s.on_validation("r2", 0.1, 0, {"loss": 0.1, "batches": 4}).stop == []
    assert [rid for rid, _ in s.rungs[0][0]] == ["r2", "r0", "r1"] and s.rungs[0][1] == [["r2", 0.1]]


@pytest.mark.parametrize("report", [None, {"loss": 0.9}, {"loss": 0.9, "batches": "ten"},
                                    {"loss": 0.9, "batches": True}, {"loss": 0.9, "batches": float("nan")}])
def test_a_report_without_a_number_for_the_time_metric_moves_no_rung(report: dict | None) -> None:
    s = asha(ONE_BRACKET)
    s.initial()
    s.on_validation("r0", 0.5, 0, {"loss": 0.5, "batches": 1})
    assert s.on_validation("r1", 0.9, 50, report).stop == []  # it would be stopped at rung 1
    assert s.best["r1"] == 0.9 and [rid for rid, _ in s.rungs[0][0]] == ["r0"]


def test_any_metric_can_measure_time_and_the_state_round_trips() -> None:
    s = asha("max_trials: 4, time_metric: epochs_done, max_time: 8, mode: aggressive, max_rungs: 2, divisor: 2, "
             "max_concurrent_trials: 4")
    s.initial()
    assert s.brackets[0].rung_lengths == (4, 8)
    s.on_validation("r0", 0.2, 1, {"epochs_done": 4.0})
    restored = asha("max_trials: 4, time_metric: epochs_done, max_time: 8, mode: aggressive, max_rungs: 2, "
                    "divisor: 2, max_concurrent_trials: 4", state=s.state())
    assert restored.on_validation("r1", 0.3, 1, {"epochs_done": 4}).stop == ["r1"]
    assert "(4 epochs_done," in restored.stop_reasons()["r1"]


def test_time_metric_and_max_time_are_kept_in_the_config() -> None:
    sc = parse_experiment_config("entrypoint: x\nsearcher: {name: adaptive_asha, metric: x, max_trials: 10, "
                                 "time_metric: batches, max_time: 100}\n").searcher
    assert (sc.time_metric, sc.max_time, sc.max_length, sc.trial_length) == ("batches", 100, None, 100)
    other = parse_experiment_config("entrypoint: x\nsearcher: {name: adaptive_asha, metric: x, max_trials: 10, "
                                    "time_metric: epochs_done, max_time: 3}\n").searcher
    assert other.trial_length == 0  # not in batches: the trial decides how long it trains


@pytest.mark.parametrize(("searcher", "field"), [
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches}", "searcher.max_time"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, max_time: 10}", "searcher.time_metric"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: 0}", "searcher.max_time"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: -5}", "searcher.max_time"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: 1.5}", "searcher.max_time"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: batches, max_time: ten}", "searcher.max_time"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: '', max_time: 10}", "searcher.time_metric"),
    ("{name: adaptive_asha, metric: l, max_trials: 4, time_metric: [a], max_time: 10}", "searcher.time_metric"),
    ("{name: adaptive_asha, metric: l, max_trials: 4}", "searcher.max_length"),
    ("{name: random, metric: l, max_trials: 4, time_metric: batches, max_time: 10}", "searcher.time_metric"),
    ("{name: single, metric: l, max_length: 4, time_metric: batches, max_time: 10}", "searcher.max_time"),
])
def test_bad_time_metric_or_max_time_is_named(searcher: str, field: str) -> None:
    assert field in problems(searcher)


CONFIG = """\
name: asha-time
entrypoint: python train.py
searcher: {name: adaptive_asha, metric: x, max_trials: 4, time_metric: batches, max_time: 16, max_rungs: 2,
           mode: aggressive}
hyperparameters:
  increment_by: {type: int, minval: 1, maxval: 8}
"""


def report(client: TestClient, trial_id: int, token: str, steps: int, metrics: dict) -> None:
    body = {"group": "validation", "metrics": {"trialId": trial_id, "trialRunId": 1, "stepsCompleted": steps,
                                               "reportTime": None, "metrics": {"avgMetrics": metrics}}}
    r = post(client, f"/api/v1/trials/{trial_id}/metrics", body, task_header(token))
    assert r.status_code == 200, r.text


def test_through_the_master_the_reported_time_metric_places_the_trial(client: TestClient, user: dict,
                                                                      app: FastAPI) -> None:
    agent = FakeAgent(app, "agent-4", slots=4)
    try:
        exp = create_experiment(client, user, CONFIG)
        assert exp["config"]["searcher"]["time_metric"] == "batches"
        tasks = sorted(agent.start_all(), key=lambda t: t.trial_id)
        assert len(tasks) == 4  # rungs at 4 and 16
        with app.state.ctx.db.session() as s:
            assert {s.get(models.Trial, t.trial_id).target_length for t in tasks} == {16}
        report(client, tasks[0].trial_id, tasks[0].token, 4, {"x": 0.5, "batches": 4})
        report(client, tasks[1].trial_id, tasks[1].token, 100, {"x": 0.9, "batches": 3})  # not at rung 1 yet
        ctl = app.state.ctx.controller
        assert [ctl.should_preempt(t.allocation_id) for t in tasks] == [False] * 4
        report(client, tasks[1].trial_id, tasks[1].token, 100, {"x": 0.9, "batches": 4})  # now it is: stopped
        assert [ctl.should_preempt(t.allocation_id) for t in tasks] == [False, True, False, False]
        stopped = client.get(f"/api/v1/trials/{tasks[1].trial_id}", headers=user).json()["trial"]
        assert stopped["state"] == "STATE_STOPPING_COMPLETED"
    finally:
        agent.close()
