"""The scheduling pass: decide placements for every pool from one snapshot (pass_snapshot.py reads
it; the pure scheduler decides), then write the decision: preemptions, why each unplaced allocation
waits, and the assignments themselves (assignment.py), in short batches.

The Controller reads the snapshot and decides outside the cluster lock, then writes under it, batch
by batch; every write checks the rows as they are then (see `record_waits` and assignment.assign).
`plan` does all of it but the assignments in the caller's one transaction."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.cluster import assignment, pass_snapshot, wait_reasons, wait_records
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.assignment import Candidate, Placement
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.cluster.pass_snapshot import PassSnapshot, PendingRow
from pedl.master.cluster.wait_reasons import PoolView, WaitKind
from pedl.master.cluster.wait_records import WaitUpdate
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.task_specs import SpecCache
from pedl.scheduling.scheduler import AgentSnapshot, RunningTask, SchedulePlan, SlotRequest
from pedl.scheduling.scheduler import plan as schedule_plan

WAIT_REASON_REFRESH = 30.0  # seconds between rewrites of a wait reason whose kind did not change
# reasons a user may have to act on (a larger agent, max_instances): warning events
ATTENTION = frozenset({WaitKind.NO_AGENTS, WaitKind.TOO_LARGE, WaitKind.AT_MAX, WaitKind.NEEDS_CONTAINERS})

__all__ = [
    "Placement",
    "PassPlan",
    "apply",
    "apply_planned",
    "decide",
    "plan",
    "prepare_planned",
    "preempt",
    "record_waits",
]


@dataclass
class PassPlan:
    now: float
    placements: list[Placement] = field(default_factory=list)
    planned: dict[str, Candidate] = field(default_factory=dict)  # the placed allocations as the snapshot saw them
    preempt: list[str] = field(default_factory=list)
    waits: list[WaitUpdate] = field(default_factory=list)
    wake_provisioners: bool = False


def plan(fx: ClusterEffects, s: Session, hub: AgentHub) -> list[Placement]:
    """Decide placements for every pool from the session's view and record the rest of the decision
    (preemptions, wait reasons) in its transaction; `apply` assigns what it returns."""
    s.flush()
    decided = decide(fx.config, pass_snapshot.load(s, fx.config, hub), fx.now)
    preempt(fx, s, decided)
    record_waits(s, decided.now, decided.waits)
    return decided.placements


def apply(
    fx: ClusterEffects, s: Session, hub: AgentHub, chunk: list[Placement], cache: SpecCache | None = None
) -> None:
    """Assign a batch of placements whose allocations are still PENDING (assignment.py)."""
    assignment.assign(fx, s, hub, chunk, cache=cache)


def prepare_planned(
    fx: ClusterEffects,
    s: Session,
    hub: AgentHub,
    decided: PassPlan,
    chunk: list[Placement],
    cache: SpecCache,
    known: KnownAgents | None = None,
) -> assignment.Prepared:
    """Make a batch of the pass's placements ready to write (assignment.prepare: reads, tokens, task
    specs), without the lock, in a read-only session."""
    return assignment.prepare(fx, s, hub, chunk, planned=decided.planned, cache=cache, known=known)


def apply_planned(
    fx: ClusterEffects, s: Session, hub: AgentHub, decided: PassPlan, chunk: list[Placement], cache: SpecCache
) -> None:
    """Assign a batch of the pass's placements, planned outside the lock, in one transaction (what
    assignment.assign checks against the rows as they are now)."""
    assignment.assign(fx, s, hub, chunk, planned=decided.planned, cache=cache)


def decide(config: MasterConfig, snap: PassSnapshot, now: float) -> PassPlan:
    """Pure: the snapshot in, the pass's decision out."""
    out = PassPlan(now)
    if not snap.pending:
        return out
    used = snap.used
    pending_by_pool, agents_by_pool, held_by_pool = defaultdict(list), defaultdict(list), defaultdict(list)
    for row in snap.pending:
        pending_by_pool[row.resource_pool].append(row)
    for a in snap.agents:
        taken = used.get(a.id, ())
        agents_by_pool[a.resource_pool].append(
            AgentSnapshot(
                a.id,
                a.slot_ids,
                tuple(sl for sl in a.slot_ids if sl not in taken) if taken else a.slot_ids,
                runs_containers=a.runs_containers,
                spot=a.id in snap.spot,
                zero_slot_tasks=snap.zero_slot[a.id],
            )
        )
    for held in snap.held:
        held_by_pool[held.resource_pool].append(held)
    exps = snap.experiments
    for pool in config.resource_pools:
        pending = pending_by_pool.get(pool.pool_name)
        if not pending:
            continue
        pool_agents = agents_by_pool.get(pool.pool_name, [])
        pool_image = config.task_defaults(pool.pool_name).image is not None
        requests = []
        for a in pending:
            x = exps.get(a.experiment_id) if a.experiment_id is not None else None
            requests.append(
                SlotRequest(
                    a.id,
                    a.slots_needed,
                    a.priority,
                    a.queued_at,
                    *_group(a.experiment_id, x),
                    position=x.position if x and a.id not in snap.behind else None,
                    needs_containers=bool(x and (x.image or pool_image)),
                )
            )
        sched = pool.scheduler
        # what the scheduler reads of running tasks: their groups' usage (fair share), victims
        # (preemption), and the slots held in groups with a max_slots; free slots come from `used`
        everyone = sched.type == "fair_share" or sched.preemption
        capped = {r.group for r in requests if r.max_slots is not None}
        running = []
        for h in held_by_pool.get(pool.pool_name, []):
            group = str(h.experiment_id) if h.experiment_id in exps else ""
            if everyone or group in capped:
                running.append(
                    RunningTask(
                        h.id,
                        h.priority,
                        tuple((p["agent_id"], tuple(p["slot_ids"])) for p in h.assignment),
                        h.since,
                        group,
                        h.preempt_requested,
                        h.trial_id is not None,
                    )
                )
        result = (
            schedule_plan(
                requests,
                pool_agents,
                running,
                scheduler=sched.type,
                fitting=sched.fitting_policy,
                preemption=sched.preemption,
                max_zero_slot_per_agent=config.limits.max_zero_slot_tasks_per_agent,
            )
            if pool_agents
            else SchedulePlan()
        )
        by_id = {a.id: a for a in pending} if result.assignments else {}
        for a in result.assignments:
            out.placements.append((a.allocation_id, a.placements))
            row = by_id[a.allocation_id]
            out.planned[row.id] = Candidate(
                row.id, row.task_id, row.trial_id, row.name, row.resource_pool, row.wait_kind
            )
        out.preempt += result.preempt
        if len(result.assignments) < len(requests):
            out.wake_provisioners |= pool.provider is not None
            view = PoolView(
                pool.pool_name,
                [len(a.slot_ids) for a in pool_agents],
                sum(len(a.free_slot_ids) for a in pool_agents),
                dynamic=pool.provider is not None,
                container_agents=sum(1 for a in pool_agents if a.runs_containers),
                max_instances=pool.provider.max_instances if pool.provider else 0,
                **snap.instances.get(pool.pool_name, {}),
            )
            placed = {a.allocation_id for a in result.assignments}
            in_containers = {r.allocation_id for r in requests if r.needs_containers}
            out.waits += _wait_reasons(
                now,
                [a for a in pending if a.id not in placed],
                view,
                result.capped,
                in_containers,
                set(result.zero_capped),
                config.limits.max_zero_slot_tasks_per_agent,
            )
    return out


def _group(experiment_id: int | None, x: pass_snapshot.ExperimentSettings | None) -> tuple[Any, ...]:
    """(group, weight, max_slots) of a request: its experiment's, or none."""
    if x is None:
        return "", 1.0
    return str(experiment_id), x.weight, x.max_slots


def _wait_reasons(
    now: float,
    waiting: list[PendingRow],
    pool: PoolView,
    capped: dict[str, tuple[int, int]],
    in_containers: set[str],
    zero_capped: set[str],
    zero_cap: int,
) -> list[WaitUpdate]:
    """Why each unplaced allocation waits (`capped`: those its experiment's max_slots held back, as
    the scheduler's plan says; `zero_capped`: zero-slot ones every agent's cap of `zero_cap` held back),
    where that changed. A new kind of reason is also a trial event (so
    `--follow` and the experiment's events show it); the text alone (a count in it) is refreshed at
    most every WAIT_REASON_REFRESH seconds, so a long queue is not rewritten on every pass."""
    out = []
    more_urgent = 0
    by_priority = sorted(waiting, key=lambda a: (a.priority, a.queued_at, a.id))
    for i, alloc in enumerate(by_priority):
        if i and alloc.priority != by_priority[i - 1].priority:
            more_urgent = i
        why = (
            wait_reasons.max_slots_reason(alloc.slots_needed, *capped[alloc.id])
            if alloc.id in capped
            else wait_reasons.zero_slot_reason(pool, zero_cap)
            if alloc.id in zero_capped
            else (alloc.id in in_containers and wait_reasons.container_reason(pool))
            or wait_reasons.reason(alloc.slots_needed, pool, more_urgent)
        )
        kind_changed = alloc.wait_kind != why.kind
        if kind_changed or (alloc.wait_reason != why.text and now - (alloc.wait_since or 0.0) >= WAIT_REASON_REFRESH):
            level = (
                ("warning" if why.kind in ATTENTION else "info")
                if kind_changed and alloc.trial_id is not None
                else None
            )
            out.append(
                WaitUpdate(alloc.id, alloc.resource_pool, alloc.trial_id, alloc.wait_kind, why.kind, why.text, level)
            )
    return out


def preempt(fx: ClusterEffects, s: Session, decided: PassPlan) -> None:
    """The preemptions the scheduler asked for (each checks the allocation's state as it is now), and
    a wake-up for the provisioners when a pool with a provider could not place everything."""
    for victim_id in decided.preempt:
        victim = s.get(models.Allocation, victim_id)
        if victim is not None:
            allocations.preempt(fx, s, victim, "preempted for a more urgent trial")
    if decided.wake_provisioners:
        fx.wake_provisioners()


def record_waits(s: Session, now: float, waits: Sequence[WaitUpdate]) -> None:
    """Store the wait reasons (and their events) of the allocations still PENDING in the pool they
    were decided for with the kind the snapshot saw; any other has moved on and the next pass looks
    again."""
    if waits:
        s.flush()
        assignment.expire_allocations(s, wait_records.store(s, now, waits))
