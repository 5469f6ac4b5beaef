"""Determined's v1Experiment and the answers of the experiment routes: create (or validate only), list,
get with its jobSummary, continue, patch, the experiment's page of trials, and the bulk actions on a
project's experiments."""

from __future__ import annotations

from typing import Any, Literal

from pedl.master.wire.base import Pagination, WireModel
from pedl.master.wire.trial import Trial


class Experiment(WireModel):
    """v1Experiment. Every field is set for a stored experiment (nulls included); the empty experiment
    Determined answers a validateOnly create with sets only the fields that default to None unset."""

    id: int
    name: str
    description: str
    labels: list[str]
    archived: bool
    config: dict[str, Any] | None
    originalConfig: str
    jobId: str
    numTrials: int
    projectId: int
    projectOwnerId: int
    activeTrials: int | None = None
    bestTrialSearcherMetric: float | None = None
    bestTrialId: int | None = None
    searcherType: str
    searcherMetric: str | None = None
    startTime: str
    endTime: str | None = None
    state: str
    username: str
    userId: int
    progress: float
    resourcePool: str
    forkedFrom: int | None = None
    notes: str
    projectName: str | None = None
    workspaceName: str | None = None
    workspaceId: int | None = None
    parentArchived: bool | None = None
    unmanaged: bool
    endReason: str | None = None
    checkpointCount: int | None = None
    checkpointSize: str | None = None  # int64 as a string


LaunchWarning = Literal["LAUNCH_WARNING_CURRENT_SLOTS_EXCEEDED"]


class CreateExperimentResponse(WireModel):
    """v1CreateExperimentResponse; pedl's own warningMessages say what each warning is about."""

    experiment: Experiment
    config: dict[str, Any]
    warnings: list[LaunchWarning]
    warningMessages: list[str]


class GetExperimentsResponse(WireModel):
    experiments: list[Experiment]
    pagination: Pagination


class JobSummary(WireModel):
    jobsAhead: int
    state: str  # jobv1State


class GetExperimentResponse(WireModel):
    experiment: Experiment
    config: dict[str, Any]
    jobSummary: JobSummary | None = None


class ExperimentResponse(WireModel):
    """The answer of continue and of patch: the experiment as it is now."""

    experiment: Experiment


class GetExperimentTrialsResponse(WireModel):
    trials: list[Trial]
    pagination: Pagination


class ExperimentActionResult(WireModel):
    """v1ExperimentActionResult: one experiment of a bulk action; error is "" where it was done."""

    id: int
    error: str


class ExperimentActionsResponse(WireModel):
    """v1{Kill,Pause,Activate,Cancel,Archive,Unarchive,Delete,Move}ExperimentsResponse."""

    results: list[ExperimentActionResult]


class Event(WireModel):
    """pedl's own: one recorded change of an experiment, trial, allocation, agent or pool."""

    id: int
    entityType: str
    entityId: str
    time: str
    fromState: str | None
    toState: str | None
    level: str
    message: str


class GetExperimentEventsResponse(WireModel):
    events: list[Event]
