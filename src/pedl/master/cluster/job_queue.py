"""The job queue as the scheduler sees it: each experiment with a trial waiting or running is a job
(Determined's `job-<id>`), ordered in its pool by priority, then the job's queue position (its
submission time unless moved), then FIFO: the scheduler's own key (cluster/scheduler.queue_key)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.lifecycle.states import HELD, LIVE_ALLOCATION
from pedl.scheduling.scheduler import SlotRequest, queue_key

JOB_PREFIX = "job-"

# a job's place among its pool's jobs of equal priority: the stored position, else its submission time
POSITION = func.coalesce(models.Experiment.queue_position, models.Experiment.start_time)


def job_id(experiment_id: int) -> str:
    return f"{JOB_PREFIX}{experiment_id}"


def experiment_of(job: str, field: str) -> int:
    """The experiment id of a job id; a job id of another shape is the caller's mistake."""
    digits = job.removeprefix(JOB_PREFIX)
    if not job.startswith(JOB_PREFIX) or not digits.isdigit() or len(digits) > 18:
        raise InvalidArgument.at(field, f"{job!r} is not a job id of this master (they read job-<experiment id>)")
    return int(digits)


@dataclass
class Job:
    """One experiment's place in its pool's queue."""

    experiment_id: int
    pool: str
    priority: int
    position: float
    requested_slots: int = 0
    allocated_slots: int = 0
    scheduled: bool = False  # a trial of it holds slots
    key: tuple = ()  # the scheduler's key of its most urgent allocation
    jobs_ahead: int = 0

    @property
    def state(self) -> str:
        """Determined's jobv1State."""
        return "STATE_SCHEDULED" if self.scheduled else "STATE_QUEUED"


def queue(s: Session, pool: str | None = None) -> list[Job]:
    """Every job (of `pool`, or of every pool), in the scheduler's order within each pool, pools in
    name order; jobs_ahead counts the jobs before it in its pool."""
    q = (
        select(
            models.Allocation.id,
            models.Allocation.state,
            models.Allocation.slots_needed,
            models.Allocation.priority,
            models.Allocation.queued_at,
            models.Allocation.resource_pool,
            models.Trial.experiment_id,
            POSITION,
        )
        .join(models.Trial, models.Trial.id == models.Allocation.trial_id)
        .join(models.Experiment, models.Experiment.id == models.Trial.experiment_id)
        .where(models.Allocation.state.in_(LIVE_ALLOCATION))
    )
    if pool is not None:
        q = q.where(models.Allocation.resource_pool == pool)
    jobs: dict[tuple[str, int], Job] = {}
    for alloc_id, state, slots, priority, queued_at, alloc_pool, exp_id, position in s.execute(q):
        key = queue_key(SlotRequest(alloc_id, slots, priority, queued_at, position=position))
        job = jobs.get((alloc_pool, exp_id))
        if job is None:
            job = jobs[(alloc_pool, exp_id)] = Job(exp_id, alloc_pool, priority, position, key=key)
        job.requested_slots += slots
        if state in HELD:
            job.allocated_slots += slots
            job.scheduled = True
        if key < job.key:
            job.key, job.priority = key, priority
    ordered = sorted(jobs.values(), key=lambda j: (j.pool, j.key, j.experiment_id))
    ahead: dict[str, int] = {}
    for job in ordered:
        job.jobs_ahead = ahead.get(job.pool, 0)
        ahead[job.pool] = job.jobs_ahead + 1
    return ordered
