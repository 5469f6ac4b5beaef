"""v1Job and the answer of the job queue's listing (det job list)."""

from __future__ import annotations

from pedl.master.wire.base import Pagination, WireModel
from pedl.master.wire.experiment import JobSummary


class Job(WireModel):
    """One experiment's place in its pool's queue."""

    jobId: str
    type: str  # jobv1Type: TYPE_EXPERIMENT
    entityId: str
    name: str
    submissionTime: str | None
    username: str
    userId: int
    resourcePool: str
    isPreemptible: bool
    priority: int
    weight: float
    requestedSlots: int
    allocatedSlots: int
    workspaceId: int
    progress: float
    summary: JobSummary  # its state and the jobs ahead of it


class JobEntry(WireModel):
    """v1RBACJob: det reads the job from `full`, and its summary beside it."""

    full: Job
    summary: JobSummary


class GetJobsV2Response(WireModel):
    jobs: list[JobEntry]
    pagination: Pagination
