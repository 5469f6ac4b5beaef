"""trialv1Trial and its workloads: unknown keys refused, a workload container holds exactly one workload,
the optional parts of a trial are left out of the JSON until set."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.trial import DownsampledMetrics, MetricsWorkload, Trial, WorkloadContainer, WorkloadMetrics

TRIAL = {
    "id": 1,
    "experimentId": 1,
    "hparams": {"lr": 0.1},
    "restarts": 0,
    "startTime": "2024-01-01T00:00:00Z",
    "endTime": None,
    "state": "STATE_RUNNING",
    "totalBatchesProcessed": 0,
    "summaryMetrics": {},
    "taskId": "1.x",
    "taskIds": ["1.x"],
    "searcherMetricValue": None,
    "checkpointCount": 0,
    "totalCheckpointSize": "0",
    "warmStartCheckpointUuid": "",
    "latestCheckpointUuid": "",
    "endReason": None,
    "runnerState": "",
}
WORKLOAD = MetricsWorkload(
    metrics=WorkloadMetrics(avgMetrics={"loss": 1}, batchMetrics=[]),
    numInputs=0,
    totalBatches=5,
    endTime="2024-01-01T00:00:00Z",
)


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Trial.model_validate({**TRIAL, "bestMetric": 1.0})


def test_the_optional_parts_are_left_out_until_set() -> None:
    t = Trial.model_validate(TRIAL)
    assert t.model_dump(exclude_unset=True) == TRIAL
    t.bestValidation = WORKLOAD
    t.waitReason = "no slots"
    dumped = t.model_dump(exclude_unset=True)
    assert dumped["bestValidation"]["metrics"] == {"avgMetrics": {"loss": 1}, "batchMetrics": []}
    assert dumped["waitReason"] == "no slots"
    assert "latestValidation" not in dumped and "bestCheckpoint" not in dumped


def test_a_metric_value_keeps_its_kind() -> None:
    assert '"avgMetrics":{"loss":1}' in WORKLOAD.model_dump_json()


@pytest.mark.parametrize("fields", [{}, {"training": WORKLOAD, "validation": WORKLOAD}, {"training": None}])
def test_a_workload_container_holds_exactly_one(fields: dict) -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        WorkloadContainer(**fields)


def test_a_workload_container_shows_its_one_workload() -> None:
    assert set(WorkloadContainer(validation=WORKLOAD).model_dump(exclude_unset=True)) == {"validation"}


def test_a_series_type_is_one_of_determineds() -> None:
    with pytest.raises(ValidationError):
        DownsampledMetrics(group="training", type="METRIC_TYPE_OTHER", data=[])  # type: ignore[arg-type]
