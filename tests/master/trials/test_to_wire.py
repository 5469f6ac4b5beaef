"""A trial row as trialv1Trial and its reports and checkpoints as workloads: the exact shape of known rows,
the optional parts only where there are some (also over the API)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from pedl.master.checkpoints.totals import CheckpointTotals
from pedl.master.db import models
from pedl.master.trials import to_wire
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, create_experiment

T0 = 1700000000.0  # 2023-11-14T22:13:20Z


def trial_row() -> models.Trial:
    return models.Trial(
        id=4,
        experiment_id=2,
        hparams={"lr": 0.1},
        restarts=1,
        start_time=T0,
        end_time=None,
        state="STATE_RUNNING",
        total_batches=30,
        summary_metrics=None,
        task_id="2.abc",
        best_metric=0.25,
        warm_start_checkpoint=None,
        latest_checkpoint="c-1",
        end_reason=None,
    )


def metric(group: str = "validation", steps: int = 10) -> models.Metric:
    return models.Metric(
        id=1,
        trial_id=4,
        trial_run_id=2,
        group=group,
        steps_completed=steps,
        report_time=T0 + 1,
        metrics={"loss": 0.25, "n": 3},
    )


def checkpoint(state: str = "STATE_COMPLETED", deleting_by: str | None = None) -> models.Checkpoint:
    return models.Checkpoint(
        uuid="c-1",
        trial_id=4,
        state=state,
        report_time=T0 + 2,
        steps_completed=10,
        meta={"steps_completed": 10},
        resources={"model.pt": 1024},
        deleting_by=deleting_by,
    )


BASE = {
    "id": 4,
    "experimentId": 2,
    "hparams": {"lr": 0.1},
    "restarts": 1,
    "startTime": "2023-11-14T22:13:20Z",
    "endTime": None,
    "state": "STATE_RUNNING",
    "totalBatchesProcessed": 30,
    "summaryMetrics": {},
    "taskId": "2.abc",
    "taskIds": ["2.abc"],
    "searcherMetricValue": 0.25,
    "checkpointCount": 0,
    "totalCheckpointSize": "0",
    "warmStartCheckpointUuid": "",
    "latestCheckpointUuid": "c-1",
    "endReason": None,
    "runnerState": "",
}
WORKLOAD = {
    "metrics": {"avgMetrics": {"loss": 0.25, "n": 3}, "batchMetrics": []},
    "numInputs": 0,
    "totalBatches": 10,
    "endTime": "2023-11-14T22:13:21Z",
}


def test_a_bare_trial_has_exactly_this_shape() -> None:
    assert to_wire.trial(trial_row()).model_dump(exclude_unset=True) == BASE


def test_a_described_trial_adds_its_validations_checkpoint_and_wait() -> None:
    got = to_wire.trial(
        trial_row(), metric(), metric(steps=10), CheckpointTotals(count=3, size=99), checkpoint(), "no slots"
    )
    assert got.model_dump(exclude_unset=True) == {
        **BASE,
        "checkpointCount": 3,
        "totalCheckpointSize": "99",
        "bestValidation": WORKLOAD,
        "latestValidation": WORKLOAD,
        "bestCheckpoint": {
            "uuid": "c-1",
            "state": "STATE_COMPLETED",
            "totalBatches": 10,
            "endTime": "2023-11-14T22:13:22Z",
            "metadata": {"steps_completed": 10},
            "resources": {"model.pt": "1024"},
        },
        "waitReason": "no slots",
    }


def test_an_empty_wait_reason_is_left_out() -> None:
    assert "waitReason" not in to_wire.trial(trial_row(), wait_reason="").model_dump(exclude_unset=True)


def test_a_checkpoint_workload_shows_what_det_can_download() -> None:
    assert to_wire.checkpoint_workload(checkpoint("STATE_PARTIALLY_DELETED")).state == "STATE_COMPLETED"
    assert to_wire.checkpoint_workload(checkpoint("STATE_PARTIALLY_DELETED", "gc-1")).state == "STATE_DELETED"
    assert to_wire.checkpoint_workload(checkpoint("STATE_ERROR")).state == "STATE_ERROR"


def test_a_metrics_report_has_exactly_this_shape() -> None:
    assert to_wire.metrics_report(metric("training")).model_dump(exclude_unset=True) == {
        "group": "training",
        "stepsCompleted": 10,
        "trialRunId": 2,
        "reportTime": "2023-11-14T22:13:21Z",
        "metrics": {"loss": 0.25, "n": 3},
    }


def test_a_fresh_trial_over_the_api_has_no_validation_checkpoint_or_wait(
    client: TestClient, user: dict, agent: FakeAgent
) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    [task] = agent.start_all()
    got = client.get(f"/api/v1/trials/{task.trial_id}", headers=user).json()["trial"]
    assert not {"bestValidation", "latestValidation", "bestCheckpoint", "waitReason"} & set(got)
    assert got["state"] == "STATE_RUNNING" and got["totalCheckpointSize"] == "0"
