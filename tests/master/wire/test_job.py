"""v1Job: its summary sits inside it and beside it in the listing, where det reads each."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.base import Pagination
from pedl.master.wire.experiment import JobSummary
from pedl.master.wire.job import GetJobsV2Response, Job, JobEntry

JOB = {
    "jobId": "job-3",
    "type": "TYPE_EXPERIMENT",
    "entityId": "3",
    "name": "e",
    "submissionTime": None,
    "username": "u",
    "userId": 1,
    "resourcePool": "default",
    "isPreemptible": True,
    "priority": 42,
    "weight": 1.0,
    "requestedSlots": 1,
    "allocatedSlots": 0,
    "workspaceId": 1,
    "progress": 0.0,
    "summary": {"jobsAhead": 0, "state": "STATE_QUEUED"},
}


def test_a_listing_carries_each_summary_twice() -> None:
    job = Job.model_validate(JOB)
    listed = GetJobsV2Response(jobs=[JobEntry(full=job, summary=job.summary)], pagination=Pagination.of(0, 0, 1, 1))
    entry = listed.model_dump()["jobs"][0]
    assert entry["full"] == JOB and entry["summary"] == JOB["summary"]


def test_a_job_needs_its_summary() -> None:
    with pytest.raises(ValidationError, match="summary"):
        Job.model_validate({k: v for k, v in JOB.items() if k != "summary"})
    assert JobSummary(jobsAhead=2, state="STATE_SCHEDULED").model_dump() == {"jobsAhead": 2, "state": "STATE_SCHEDULED"}
