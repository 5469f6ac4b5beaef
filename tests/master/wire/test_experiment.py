"""v1Experiment and the experiment routes' answers: unknown keys refused, unset fields left out of the JSON."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.base import Pagination
from pedl.master.wire.experiment import (
    CreateExperimentResponse,
    Experiment,
    ExperimentActionResult,
    ExperimentActionsResponse,
    GetExperimentResponse,
    GetExperimentsResponse,
    JobSummary,
)

REQUIRED = {
    "id": 3,
    "name": "e",
    "description": "",
    "labels": [],
    "archived": False,
    "config": {"a": 1},
    "originalConfig": "a: 1",
    "jobId": "job-3",
    "numTrials": 0,
    "projectId": 1,
    "projectOwnerId": 0,
    "searcherType": "single",
    "startTime": "2024-01-01T00:00:00Z",
    "state": "STATE_ACTIVE",
    "username": "u",
    "userId": 2,
    "progress": 0.0,
    "resourcePool": "default",
    "notes": "",
    "unmanaged": False,
}


def test_an_unknown_key_is_refused() -> None:
    with pytest.raises(ValidationError, match="extra"):
        Experiment.model_validate({**REQUIRED, "owner": "u"})


def test_a_missing_required_field_is_refused() -> None:
    with pytest.raises(ValidationError, match="jobId"):
        Experiment.model_validate({k: v for k, v in REQUIRED.items() if k != "jobId"})


def test_unset_optional_fields_are_left_out_and_a_set_null_kept() -> None:
    e = Experiment.model_validate({**REQUIRED, "endTime": None})
    assert e.model_dump(exclude_unset=True) == {**REQUIRED, "endTime": None}
    assert "bestTrialId" not in e.model_dump(exclude_unset=True)


def test_the_checkpoint_size_is_an_int64_string() -> None:
    with pytest.raises(ValidationError, match="checkpointSize"):
        Experiment.model_validate({**REQUIRED, "checkpointSize": 10})
    assert '"checkpointSize":"10"' in Experiment.model_validate({**REQUIRED, "checkpointSize": "10"}).model_dump_json()


def test_a_launch_warning_is_one_of_determineds() -> None:
    with pytest.raises(ValidationError):
        CreateExperimentResponse.model_validate(
            {"experiment": REQUIRED, "config": {}, "warnings": ["SLOTS"], "warningMessages": []}
        )


def test_the_job_summary_is_left_out_when_unset() -> None:
    r = GetExperimentResponse(experiment=Experiment.model_validate(REQUIRED), config={})
    assert set(r.model_dump(exclude_unset=True)) == {"experiment", "config"}
    r = GetExperimentResponse(
        experiment=Experiment.model_validate(REQUIRED),
        config={},
        jobSummary=JobSummary(jobsAhead=0, state="STATE_SCHEDULED"),
    )
    assert r.model_dump(exclude_unset=True)["jobSummary"] == {"jobsAhead": 0, "state": "STATE_SCHEDULED"}


def test_a_listing_carries_its_pagination() -> None:
    page = GetExperimentsResponse(
        experiments=[Experiment.model_validate(REQUIRED)], pagination=Pagination.of(0, 1, 5, 1)
    )
    assert page.model_dump(exclude_unset=True)["pagination"] == {
        "offset": 0,
        "limit": 1,
        "startIndex": 0,
        "endIndex": 1,
        "total": 5,
    }


def test_a_bulk_result_is_an_id_and_an_error() -> None:
    r = ExperimentActionsResponse(
        results=[ExperimentActionResult(id=4, error=""), ExperimentActionResult(id=5, error="not found")]
    )
    assert r.model_dump(exclude_unset=True) == {"results": [{"id": 4, "error": ""}, {"id": 5, "error": "not found"}]}
    with pytest.raises(ValidationError, match="error"):
        ExperimentActionResult.model_validate({"id": 4})
