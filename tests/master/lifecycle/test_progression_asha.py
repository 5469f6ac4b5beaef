"""adaptive_asha through the master, as lifecycle/progression.py drives it: a stopped trial's endReason,
pause and activate keeping the searcher's state, and a report's time metric deciding as its steps did (the
searcher alone: tests/scheduling/searcher/test_asha.py, test_asha_time_metric.py)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.db import models
from tests.master.fakes import FakeAgent, create_experiment, post, task_header

ASHA_CONFIG = """\
name: asha-exp
entrypoint: python train.py
searcher: {name: adaptive_asha, metric: loss, max_trials: 4, max_length: 16, max_rungs: 2, mode: aggressive}
hyperparameters:
  lr: {type: double, minval: 0.1, maxval: 0.2}
"""


def report_validation(client: TestClient, trial_id: int, token: str, steps: int, loss: float) -> None:
    body = {
        "group": "validation",
        "metrics": {
            "trialId": trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "reportTime": None,
            "metrics": {"avgMetrics": {"loss": loss}, "batchMetrics": None},
        },
    }
    r = post(client, f"/api/v1/trials/{trial_id}/metrics", body, task_header(token))
    assert r.status_code == 200, r.text


def test_a_stopped_trial_says_why_and_pause_keeps_the_searcher(client: TestClient, user: dict, app: FastAPI) -> None:
    agent = FakeAgent(app, "agent-4", slots=4)
    try:
        exp = create_experiment(client, user, ASHA_CONFIG)
        tasks = sorted(agent.start_all(), key=lambda t: t.trial_id)
        assert len(tasks) == 4  # rungs at 4 and 16 batches, one bracket of 4 live trials
        report_validation(client, tasks[0].trial_id, tasks[0].token, 4, 0.5)
        report_validation(client, tasks[1].trial_id, tasks[1].token, 4, 0.9)  # worse: stopped
        ctl = app.state.ctx.controller
        assert [ctl.should_preempt(t.allocation_id) for t in tasks] == [False, True, False, False]
        stopped = client.get(f"/api/v1/trials/{tasks[1].trial_id}", headers=user).json()["trial"]
        assert stopped["state"] == "STATE_STOPPING_COMPLETED"
        agent.exit(tasks[1].allocation_id, 0)
        stopped = client.get(f"/api/v1/trials/{tasks[1].trial_id}", headers=user).json()["trial"]
        assert stopped["state"] == "STATE_COMPLETED"
        assert stopped["endReason"].startswith("stopped early by the searcher: stopped at rung 1 of 2 (4 batches")
        assert "loss 0.9 ranked 2 of 2" in stopped["endReason"]
        leader = client.get(f"/api/v1/trials/{tasks[0].trial_id}", headers=user).json()["trial"]
        assert leader["state"] == "STATE_RUNNING" and not leader["endReason"]

        ctx = app.state.ctx

        def searcher_state() -> dict:
            with ctx.db.session() as s:
                return dict(s.get(models.Experiment, exp["id"]).searcher_state)

        before = searcher_state()
        assert post(client, f"/api/v1/experiments/{exp['id']}/pause", None, user).status_code == 200
        for t in (tasks[0], tasks[2], tasks[3]):
            agent.exit(t.allocation_id, 0)  # checkpointed and left as asked
        assert post(client, f"/api/v1/experiments/{exp['id']}/activate", None, user).status_code == 200
        assert searcher_state() == before
        resumed = sorted(agent.start_all(), key=lambda t: t.trial_id)
        assert [t.trial_id for t in resumed] == [tasks[0].trial_id, tasks[2].trial_id, tasks[3].trial_id]
        # the rung table survived: a third result at rung 1 behind the leader is stopped too
        report_validation(client, resumed[1].trial_id, resumed[1].token, 4, 0.7)
        t2 = client.get(f"/api/v1/trials/{resumed[1].trial_id}", headers=user).json()["trial"]
        assert t2["state"] == "STATE_STOPPING_COMPLETED"
    finally:
        agent.close()


# -- searcher.time_metric ------------------------------------------------------------------------------

TIME_CONFIG = """\
name: asha-time
entrypoint: python train.py
searcher: {name: adaptive_asha, metric: x, max_trials: 4, time_metric: batches, max_time: 16, max_rungs: 2,
           mode: aggressive}
hyperparameters:
  increment_by: {type: int, minval: 1, maxval: 8}
"""


def report(client: TestClient, trial_id: int, token: str, steps: int, metrics: dict) -> None:
    body = {
        "group": "validation",
        "metrics": {
            "trialId": trial_id,
            "trialRunId": 1,
            "stepsCompleted": steps,
            "reportTime": None,
            "metrics": {"avgMetrics": metrics},
        },
    }
    r = post(client, f"/api/v1/trials/{trial_id}/metrics", body, task_header(token))
    assert r.status_code == 200, r.text


def test_through_the_master_the_reported_time_metric_places_the_trial(
    client: TestClient, user: dict, app: FastAPI
) -> None:
    agent = FakeAgent(app, "agent-4", slots=4)
    try:
        exp = create_experiment(client, user, TIME_CONFIG)
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
