"""An experiment row, its owner's name, its statistics and its place (project, workspace) as Determined's
v1Experiment (docs/det-wire.md §4)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.cluster.job_queue import Job, job_id
from pedl.master.experiments.labels import split as split_labels
from pedl.master.experiments.listing import ExperimentStats
from pedl.master.wire import experiment as wire
from pedl.master.wire.base import ts
from pedl.master.wire.experiment import Experiment
from pedl.master.wire.job import Job as JobMessage
from pedl.master.workspaces.projects import Placement

if TYPE_CHECKING:
    from pedl.master.db import models


def experiment(
    e: models.Experiment, username: str, stats: ExperimentStats, place: Placement | None = None
) -> Experiment:
    place = place or Placement()
    searcher = e.config.get("searcher", {})
    return Experiment(
        id=e.id,
        name=e.name,
        description=e.description,
        labels=split_labels(e.labels),
        archived=e.archived,
        config=e.config,
        originalConfig=e.original_config,
        jobId=f"job-{e.id}",
        numTrials=stats.num_trials,
        projectId=e.project_id,
        projectOwnerId=place.project_owner_id,
        activeTrials=stats.active_trials,
        bestTrialSearcherMetric=stats.best_metric,
        bestTrialId=stats.best_trial_id,
        searcherType=searcher.get("name", "single"),
        searcherMetric=searcher.get("metric", ""),
        startTime=ts(e.start_time),
        endTime=ts(e.end_time),
        state=stats.state or e.state,
        username=username,
        userId=e.owner_id,
        progress=e.progress,
        resourcePool=e.resource_pool,
        forkedFrom=e.parent_id,
        notes=e.notes,
        projectName=place.project_name,
        workspaceName=place.workspace_name,
        workspaceId=place.workspace_id,
        parentArchived=False,
        unmanaged=False,
        endReason=e.end_reason,
        checkpointCount=stats.checkpoints.count,
        checkpointSize=str(stats.checkpoints.size),
    )


def validated_only() -> Experiment:
    """What Determined answers a validateOnly create with: an empty experiment (every field its zero value),
    which det parses before `det e create --test-mode` goes on to create the test experiment."""
    return Experiment(
        id=0,
        name="",
        description="",
        labels=[],
        archived=False,
        config=None,
        originalConfig="",
        jobId="",
        numTrials=0,
        projectId=0,
        projectOwnerId=0,
        searcherType="",
        startTime="0001-01-01T00:00:00Z",
        state="STATE_UNSPECIFIED",
        username="",
        userId=0,
        progress=0.0,
        resourcePool="",
        notes="",
        unmanaged=False,
    )


def event(ev: models.Event) -> wire.Event:
    return wire.Event(
        id=ev.id,
        entityType=ev.entity_type,
        entityId=ev.entity_id,
        time=ts(ev.time),
        fromState=ev.from_state,
        toState=ev.to_state,
        level=ev.level,
        message=ev.message,
    )


def job(j: Job, exp: models.Experiment, username: str, workspace_id: int, *, preemptible: bool) -> JobMessage:
    """Determined's v1Job: `preemptible` is whether its pool's scheduler preempts."""
    return JobMessage(
        jobId=job_id(exp.id),
        type="TYPE_EXPERIMENT",
        entityId=str(exp.id),
        name=exp.name,
        submissionTime=ts(exp.start_time),
        username=username,
        userId=exp.owner_id,
        resourcePool=j.pool,
        isPreemptible=preemptible,
        priority=j.priority,
        weight=float((exp.config.get("resources") or {}).get("weight", 1.0)),
        requestedSlots=j.requested_slots,
        allocatedSlots=j.allocated_slots,
        workspaceId=workspace_id,
        progress=exp.progress,
        summary=wire.JobSummary(state=j.state, jobsAhead=j.jobs_ahead),
    )
