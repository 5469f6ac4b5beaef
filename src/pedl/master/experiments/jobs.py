"""Jobs (`det job list|update`): the queue of each pool as det shows it, and what a job's owner or an
admin may change: its priority and weight (as `det e set` does), its place among the jobs of its
priority (ahead of or behind another), and its pool while none of its trials runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.cluster.job_queue import Job, experiment_of, job_id, queue
from pedl.master.db import models
from pedl.master.db.base import existing
from pedl.master.experiments import edits as experiment_edits
from pedl.master.experiments import to_wire
from pedl.master.experiments.service import get
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle.states import HELD, TERMINAL_EXPERIMENT, AllocationState
from pedl.master.lifecycle.transitions import record_event
from pedl.master.wire.job import JobEntry
from pedl.master.workspaces import projects

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

JOB_STATES = ("STATE_UNSPECIFIED", "STATE_QUEUED", "STATE_SCHEDULED", "STATE_SCHEDULED_BACKFILLED")
PAGE_MAX = 1000  # jobs per page: det asks again from endIndex
MOVE_STEP = 1.0  # seconds of submission time a job moved to either end of the queue is put from its neighbour


@dataclass(frozen=True)
class QueueUpdate:
    """One of det's v1QueueControl: a job and exactly one change."""

    job_id: str
    priority: int | None = None
    weight: float | None = None
    resource_pool: str | None = None
    ahead_of: str | None = None
    behind_of: str | None = None


@dataclass(frozen=True)
class JobQuery:
    """det job list: one pool's queue (None: every pool's), the states asked for (none: all), most
    urgent first (or last), a page of it."""

    pool: str | None = None
    states: tuple[str, ...] = ()
    last_first: bool = False
    offset: int = 0
    limit: int = PAGE_MAX


@dataclass(frozen=True)
class JobPage:
    jobs: list[JobEntry]
    total: int


def listing(ctx: MasterContext, q: JobQuery) -> JobPage:
    """The queue of `q.pool` (of every pool when None), in the scheduler's order, a page of it."""
    pool, states = q.pool, q.states
    if pool is not None and ctx.config.pool(pool) is None:
        raise InvalidArgument.at("resourcePool", f"no resource pool named {pool!r} ({_pool_names(ctx)})")
    with ctx.db.read_session() as s:
        jobs = queue(s, pool)
        if states and "STATE_UNSPECIFIED" not in states:
            jobs = [j for j in jobs if j.state in states]
        exps = (
            {
                e.id: e
                for e in s.scalars(
                    select(models.Experiment).where(models.Experiment.id.in_({j.experiment_id for j in jobs}))
                )
            }
            if jobs
            else {}
        )
        names = (
            {
                uid: name
                for uid, name in s.execute(
                    select(models.User.id, models.User.username).where(
                        models.User.id.in_({e.owner_id for e in exps.values()})
                    )
                )
            }
            if exps
            else {}
        )
        places = projects.placements(s, {e.project_id for e in exps.values()}) if exps else {}
        default = projects.Placement()
        listed = [(j, e) for j in jobs if (e := exps.get(j.experiment_id)) is not None]
        if q.last_first:
            listed.reverse()
        page = listed[q.offset : q.offset + q.limit]
        shown = []
        for j, e in page:
            pool_config = ctx.config.pool(j.pool)
            message = to_wire.job(
                j,
                e,
                names.get(e.owner_id, ""),
                places.get(e.project_id, default).workspace_id,
                preemptible=bool(pool_config and pool_config.scheduler.preemption),
            )
            shown.append(JobEntry(full=message, summary=message.summary))
        return JobPage(shown, len(listed))


def update(ctx: MasterContext, who: Caller, updates: list[QueueUpdate]) -> None:
    """Check every update, then apply each in order, each in its own transaction (as Determined
    does): one that fails stops the batch, and those before it stay applied."""
    for i, u in enumerate(updates):
        experiment_of(u.job_id, f"updates[{i}].jobId")
        changes = [
            name
            for name, value in (
                ("priority", u.priority),
                ("weight", u.weight),
                ("resourcePool", u.resource_pool),
                ("aheadOf", u.ahead_of),
                ("behindOf", u.behind_of),
            )
            if value is not None
        ]
        if len(changes) != 1:
            raise InvalidArgument.at(
                f"updates[{i}]",
                "one change per update: priority, weight, resourcePool, "
                f"aheadOf or behindOf (it has {', '.join(changes) or 'none'})",
            )
    for i, u in enumerate(updates):
        field = f"updates[{i}]"
        exp_id = experiment_of(u.job_id, f"{field}.jobId")
        if u.priority is not None or u.weight is not None:
            _set_resources(ctx, who, exp_id, field, u)
        elif u.resource_pool is not None:
            _move_pool(ctx, who, exp_id, u.resource_pool, f"{field}.resourcePool")
        elif u.ahead_of is not None:
            _move(ctx, who, exp_id, experiment_of(u.ahead_of, f"{field}.aheadOf"), True, f"{field}.aheadOf")
        elif u.behind_of is not None:
            _move(ctx, who, exp_id, experiment_of(u.behind_of, f"{field}.behindOf"), False, f"{field}.behindOf")


def _set_resources(ctx: MasterContext, who: Caller, exp_id: int, field: str, u: QueueUpdate) -> None:
    """Through experiment_edits.patch, as `det e set priority|weight` does; its errors name this update."""
    try:
        experiment_edits.patch(ctx, who, exp_id, priority=u.priority, weight=u.weight)
    except InvalidArgument as exc:
        name = "priority" if u.priority is not None else "weight"
        problem = exc.fields[0]["message"] if exc.fields else exc.message
        raise InvalidArgument.at(f"{field}.{name}", problem) from None


def _move_pool(ctx: MasterContext, who: Caller, exp_id: int, pool_name: str, field: str) -> None:
    pool = ctx.config.pool(pool_name)
    if pool is None:
        raise InvalidArgument.at(field, f"no resource pool named {pool_name!r} ({_pool_names(ctx)})")

    def change(s: Session) -> None:
        exp = get(s, exp_id)
        require_owner(who, exp.owner_id, f"move job {job_id(exp_id)}")
        if exp.resource_pool == pool_name:
            return
        if exp.state in TERMINAL_EXPERIMENT:
            raise Conflict(f"{job_id(exp_id)} has ended ({exp.state.removeprefix('STATE_')}): it is in no queue")
        slots = int((exp.config.get("resources") or {}).get("slots_per_trial", 1))
        if pool.max_slots_per_trial and slots > pool.max_slots_per_trial:
            raise InvalidArgument.at(
                field,
                f"pool {pool_name} takes trials of at most {pool.max_slots_per_trial} slots; this job's need {slots}",
            )
        live = list(s.scalars(_live_allocations(exp_id)))
        if any(a.state in HELD for a in live):
            raise Conflict(
                f"{job_id(exp_id)} has trials running in pool {exp.resource_pool}: a job moves to "
                "another pool only while none of its trials runs (pause it first)"
            )
        for alloc in live:
            alloc.resource_pool = pool_name
            alloc.wait_kind = alloc.wait_reason = alloc.wait_since = None
        record_event(
            s,
            ctx.clock.now(),
            "experiment",
            exp.id,
            f"moved from pool {exp.resource_pool} to {pool_name} by {who.user.username}",
        )
        exp.resource_pool = pool_name
        exp.config = {**exp.config, "resources": {**(exp.config.get("resources") or {}), "resource_pool": pool_name}}

    ctx.controller.run(change)
    ctx.controller.wake()


def _live_allocations(exp_id: int):  # a Select
    return (
        select(models.Allocation)
        .join(models.Trial, models.Trial.id == models.Allocation.trial_id)
        .where(models.Trial.experiment_id == exp_id, models.Allocation.state != AllocationState.TERMINATED)
    )


def _move(ctx: MasterContext, who: Caller, exp_id: int, anchor_id: int, ahead: bool, field: str) -> None:
    """Put the job right ahead of (or behind) the anchor job, among the jobs of their priority in
    their pool; under the cluster lock, so the queue does not change meanwhile."""

    def change(s: Session) -> None:
        exp = get(s, exp_id)
        require_owner(who, exp.owner_id, f"move job {job_id(exp_id)}")
        jobs = queue(s, exp.resource_pool)
        me = next((j for j in jobs if j.experiment_id == exp_id), None)
        if me is None:
            raise Conflict(
                f"{job_id(exp_id)} is not in the queue of pool {exp.resource_pool}: none of its trials waits or runs"
            )
        anchor = next((j for j in jobs if j.experiment_id == anchor_id), None)
        if anchor_id == exp_id:
            raise InvalidArgument.at(field, "a job cannot move ahead of or behind itself")
        if anchor is None:
            raise InvalidArgument.at(field, f"{job_id(anchor_id)} is not in the queue of pool {exp.resource_pool}")
        if anchor.priority != me.priority:
            raise InvalidArgument.at(
                field,
                f"{job_id(anchor_id)} has priority {anchor.priority} and "
                f"{job_id(exp_id)} {me.priority}: jobs are ordered by priority first, "
                "so set the priority to move a job past others of another one",
            )
        peers = [j for j in jobs if j.priority == me.priority and j is not me]
        position = _between(peers, peers.index(anchor), ahead)
        if position is None:  # no float left between the two: spread the peers out, then place it
            _spread(s, peers)
            position = _between(peers, peers.index(anchor), ahead)
        assert position is not None
        exp.queue_position = position
        where = "ahead of" if ahead else "behind"
        record_event(
            s,
            ctx.clock.now(),
            "experiment",
            exp.id,
            f"moved {where} {job_id(anchor_id)} in the queue by {who.user.username}",
        )

    ctx.controller.run(change)
    ctx.controller.wake()


def _between(peers: list[Job], i: int, ahead: bool) -> float | None:
    """A position right ahead of (behind) peers[i] and after (before) its neighbour; None when the
    two are too close for a float between them."""
    if ahead:
        if i == 0:
            return peers[i].position - MOVE_STEP
        lo, hi = peers[i - 1].position, peers[i].position
    else:
        if i + 1 == len(peers):
            return peers[i].position + MOVE_STEP
        lo, hi = peers[i].position, peers[i + 1].position
    mid = (lo + hi) / 2
    return mid if lo < mid < hi else None


def _spread(s: Session, peers: list[Job]) -> None:
    """Store positions for every peer, in their order, evenly from the first's to the last's (a
    millisecond apart when those are equal)."""
    first, last = peers[0].position, peers[-1].position
    step = max((last - first) / len(peers), 1e-3)
    for k, job in enumerate(peers):
        job.position = first + k * step
        existing(s, models.Experiment, job.experiment_id).queue_position = job.position


def _pool_names(ctx: MasterContext) -> str:
    return "pools: " + ", ".join(p.pool_name for p in ctx.config.resource_pools)
