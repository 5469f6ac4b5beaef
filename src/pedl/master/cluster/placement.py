"""The scheduling pass: plan placements for every pool from one consistent snapshot (the pure
scheduler decides; this module loads its input and applies its output), then assign them in short
batches: a task token, the ASSIGNED state, rendezvous for distributed trials, and StartTask to
each agent after commit."""

from __future__ import annotations

import logging
import secrets

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.master.cluster import allocations, wait_reasons
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.effects import ClusterEffects
from pedl.master.cluster.rendezvous import node_envs, pick_port
from pedl.master.cluster.scheduler import AgentSnapshot, RunningTask, SchedulePlan, SlotRequest
from pedl.master.cluster.scheduler import plan as schedule_plan
from pedl.master.cluster.wait_reasons import PoolView, WaitKind
from pedl.master.db import models
from pedl.master.lifecycle import HELD, LIVE_INSTANCE, AgentState, AllocationState, InstanceState
from pedl.master.services import job_queue
from pedl.master.services.passwords import token_hash
from pedl.master.services.task_specs import SpecRows, task_spec
from pedl.master.services.transitions import record_event, set_allocation_state

log = logging.getLogger(__name__)

A = AllocationState

WAIT_REASON_REFRESH = 30.0  # seconds between rewrites of a wait reason whose kind did not change
# reasons a user may have to act on (a larger agent, max_instances): warning events
ATTENTION = frozenset({WaitKind.NO_AGENTS, WaitKind.TOO_LARGE, WaitKind.AT_MAX, WaitKind.NEEDS_CONTAINERS})

# a planned placement: (allocation id, [(agent id, slot ids), ...])
Placement = tuple[str, list[tuple[str, list[str]]]]


def plan(fx: ClusterEffects, s: Session, hub: AgentHub) -> list[Placement]:
    """Decide placements for every pool (reads, plus the preemptions the scheduler asks for)."""
    pending = list(s.scalars(select(models.Allocation).where(models.Allocation.state == A.PENDING)))
    if not pending:
        return []
    connected = hub.connected_ids()
    agents = [a for a in s.scalars(select(models.Agent).where(models.Agent.state == AgentState.CONNECTED))
              if a.id in connected and a.enabled and not a.draining]
    held = list(s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))))
    used: dict[str, set[str]] = {}
    for alloc in held:
        for place in alloc.assignment or []:
            used.setdefault(place["agent_id"], set()).update(place["slot_ids"])
    groups = _experiment_groups(s, [a.trial_id for a in (*pending, *held) if a.trial_id])
    positions = _queue_positions(s, [a.trial_id for a in pending if a.trial_id])
    in_containers = _container_trials(fx, s, [a.trial_id for a in pending if a.trial_id])
    dynamic = any(p.provider for p in fx.config.resource_pools)
    instances = _instance_counts(s) if dynamic else {}
    # agents on spot instances take work first: it costs a fraction of on-demand
    spot = set(s.scalars(select(models.Instance.id).where(
        models.Instance.spot.is_(True), models.Instance.state.in_(LIVE_INSTANCE)))) if dynamic else set()
    # an instance the move planner empties takes no new work
    draining = set(s.scalars(select(models.Instance.id).where(
        or_(models.Instance.draining_since.is_not(None), models.Instance.cordoned_since.is_not(None)),
        models.Instance.state.in_(LIVE_INSTANCE)))) if dynamic else set()
    out: list[Placement] = []
    for pool in fx.config.resource_pools:
        pool_agents = [
            AgentSnapshot(a.id, tuple(sl["id"] for sl in a.slots),
                          tuple(sl["id"] for sl in a.slots if sl["id"] not in used.get(a.id, set())),
                          runs_containers=a.container_runtime == "docker", spot=a.id in spot)
            for a in agents if a.resource_pool == pool.pool_name and a.id not in draining]
        requests = [SlotRequest(a.id, a.slots_needed, a.priority, a.queued_at, *groups.get(a.trial_id, ("", 1.0)),
                                position=positions.get(a.trial_id), needs_containers=a.trial_id in in_containers)
                    for a in pending if a.resource_pool == pool.pool_name]
        if not requests:
            continue
        running = [RunningTask(a.id, a.priority,
                               tuple((p["agent_id"], tuple(p["slot_ids"])) for p in a.assignment or []),
                               a.started_at or a.assigned_at or 0.0, groups.get(a.trial_id, ("", 1.0))[0],
                               a.preempt_requested)
                   for a in held if a.resource_pool == pool.pool_name]
        sched = pool.scheduler
        result = schedule_plan(requests, pool_agents, running, scheduler=sched.type, fitting=sched.fitting_policy,
                               preemption=sched.preemption) if pool_agents else SchedulePlan()
        out += [(a.allocation_id, a.placements) for a in result.assignments]
        for victim_id in result.preempt:
            victim = s.get(models.Allocation, victim_id)
            if victim is not None:
                allocations.preempt(fx, s, victim, "preempted for a more urgent trial")
        if len(result.assignments) < len(requests):
            if pool.provider is not None:
                fx.wake_provisioners()
            view = PoolView(pool.pool_name, [len(a.slot_ids) for a in pool_agents],
                            sum(len(a.free_slot_ids) for a in pool_agents), dynamic=pool.provider is not None,
                            container_agents=sum(1 for a in pool_agents if a.runs_containers),
                            max_instances=pool.provider.max_instances if pool.provider else 0,
                            **instances.get(pool.pool_name, {}))
            placed = {a.allocation_id for a in result.assignments}
            _record_wait_reasons(fx, s, [a for a in pending if a.resource_pool == pool.pool_name
                                         and a.id not in placed], view, result.capped,
                                 {a.id for a in pending if a.trial_id in in_containers})
    return out


def _instance_counts(s: Session) -> dict[str, dict[str, int]]:
    """pool -> live_instances and booting_instances, for the wait reasons of dynamic pools."""
    out: dict[str, dict[str, int]] = {}
    for pool, state, n in s.execute(select(models.Instance.resource_pool, models.Instance.state, func.count())
                                    .where(models.Instance.state.in_(LIVE_INSTANCE))
                                    .group_by(models.Instance.resource_pool, models.Instance.state)):
        counts = out.setdefault(pool, {"live_instances": 0, "booting_instances": 0})
        counts["live_instances"] += n
        if state in (InstanceState.REQUESTED, InstanceState.STARTING):
            counts["booting_instances"] += n
    return out


def _record_wait_reasons(fx: ClusterEffects, s: Session, waiting: list[models.Allocation], pool: PoolView,
                         capped: dict[str, tuple[int, int]], in_containers: set[str]) -> None:
    """Store why each unplaced allocation waits (`capped`: those its experiment's max_slots held back,
    as the scheduler's plan says). A new kind of reason is also a trial event (so `--follow` and the
    experiment's events show it); the text alone (a count in it) is refreshed at most every
    WAIT_REASON_REFRESH seconds, so a long queue is not rewritten on every pass."""
    now = fx.now
    more_urgent = 0
    by_priority = sorted(waiting, key=lambda a: (a.priority, a.queued_at, a.id))
    for i, alloc in enumerate(by_priority):
        if i and alloc.priority != by_priority[i - 1].priority:
            more_urgent = i
        why = (wait_reasons.max_slots_reason(alloc.slots_needed, *capped[alloc.id]) if alloc.id in capped
               else (alloc.id in in_containers and wait_reasons.container_reason(pool))
               or wait_reasons.reason(alloc.slots_needed, pool, more_urgent))
        kind_changed = alloc.wait_kind != why.kind
        if kind_changed or (alloc.wait_reason != why.text and now - (alloc.wait_since or 0.0) >= WAIT_REASON_REFRESH):
            alloc.wait_kind, alloc.wait_reason, alloc.wait_since = why.kind, why.text, now
        if kind_changed and alloc.trial_id is not None:
            record_event(s, now, "trial", alloc.trial_id, f"waiting: {why.text}",
                         level="warning" if why.kind in ATTENTION else "info")


def apply(fx: ClusterEffects, s: Session, hub: AgentHub, chunk: list[Placement]) -> None:
    """Assign a batch of planned placements, loading what the task specs need in a few queries."""
    with s.no_autoflush:
        allocs = {a.id: a for a in s.scalars(select(models.Allocation).where(
            models.Allocation.id.in_([aid for aid, _ in chunk])))}
        rows = SpecRows.load(s, [a.trial_id for a in allocs.values() if a.trial_id])
        if any(len(placements) > 1 for _, placements in chunk):
            _load_rendezvous(s, rows)
        for alloc_id, placements in chunk:
            alloc = allocs.get(alloc_id)
            if alloc is not None and alloc.state == A.PENDING:  # not killed since the plan
                _assign(fx, s, hub, alloc, placements, rows)


def _assign(fx: ClusterEffects, s: Session, hub: AgentHub, alloc: models.Allocation,
            placements: list[tuple[str, list[str]]], rows: SpecRows) -> None:
    lacking = _without_containers(fx, s, alloc, placements, rows)
    if lacking:  # it stays PENDING, saying why; never started half-way on an agent that cannot run it
        why = (f"its experiment names an environment.image, and agent(s) {', '.join(lacking)} run no "
               f"containers (start them with Docker, or --container-runtime docker)")
        if alloc.wait_kind != WaitKind.NEEDS_CONTAINERS:
            alloc.wait_kind, alloc.wait_reason, alloc.wait_since = WaitKind.NEEDS_CONTAINERS, why, fx.now
            if alloc.trial_id is not None:
                record_event(s, fx.now, "trial", alloc.trial_id, f"waiting: {why}", level="warning")
        return
    port = None
    if len(placements) > 1:
        port = _rendezvous_port(fx, alloc, placements[0][0], rows)
        if port is None:  # it stays PENDING; the rest of the batch goes on
            return
    now = fx.now
    token = secrets.token_urlsafe(32)
    alloc.session_token_hash = token_hash(token)
    alloc.assignment = [{"agent_id": a, "slot_ids": slots, **({"port": port} if i == 0 and port else {})}
                        for i, (a, slots) in enumerate(placements)]
    alloc.assigned_at = now
    alloc.wait_kind, alloc.wait_reason = None, None
    where = ", ".join(f"{a}{slots}" for a, slots in placements)
    set_allocation_state(s, now, alloc, A.ASSIGNED, f"assigned to {where}")
    spec = task_spec(fx.cluster_id, alloc, token, rows, fx.config.task_container_defaults)
    ranks = [{}] if port is None else node_envs(placements, addresses=rows.agent_addresses, port=port)
    for (agent_id, slot_ids), rank_env in zip(placements, ranks, strict=True):
        conn = hub.get(agent_id)
        base = conn.master_url if conn else ""
        fx.send(agent_id, proto.StartTask(
            allocation_id=alloc.id, task_id=alloc.task_id, name=alloc.name, entrypoint=spec["entrypoint"],
            env={**spec["env"], **rank_env}, slot_ids=slot_ids, session_token=token,
            device_env=spec["device_env"], container=spec["container"],
            context_url=f"{base}/api/v1/tasks/{alloc.task_id}/context_directory"))


def _without_containers(fx: ClusterEffects, s: Session, alloc: models.Allocation,
                        placements: list[tuple[str, list[str]]], rows: SpecRows) -> list[str]:
    """The agents of the placement that cannot run the task's container ([] for a process task)."""
    trial = rows.trials.get(alloc.trial_id) if alloc.trial_id else None
    exp = rows.experiments.get(trial.experiment_id) if trial else None
    if exp is None or rows.runtime(exp, fx.config.task_container_defaults).container is None:
        return []
    agents = {a.id: a for a in s.scalars(select(models.Agent).where(
        models.Agent.id.in_([agent_id for agent_id, _ in placements])))}
    return [agent_id for agent_id, _ in placements
            if agents.get(agent_id) is None or agents[agent_id].container_runtime != "docker"]


def _load_rendezvous(s: Session, rows: SpecRows) -> None:
    """Agent addresses and the rendezvous ports already taken, for distributed placements."""
    rows.agent_addresses = {a.id: a.address for a in s.scalars(select(models.Agent))}
    rows.ports_in_use = {}
    for held in s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))):
        places = held.assignment or []
        if places and places[0].get("port"):
            rows.ports_in_use.setdefault(places[0]["agent_id"], set()).add(places[0]["port"])


def _rendezvous_port(fx: ClusterEffects, alloc: models.Allocation, chief: str, rows: SpecRows) -> int | None:
    """A free rendezvous port on the chief agent (see rendezvous.py), taken for the rest of the batch;
    None when the range is used up there (logged: the allocation waits for a port to be freed)."""
    taken = rows.ports_in_use.setdefault(chief, set())
    port = pick_port(fx.config.port_range(), taken, seed=alloc.id)
    if port is None:
        log.warning("allocation %s waits: no free rendezvous port on agent %s in %s", alloc.id, chief,
                    fx.config.rendezvous_port_range)
        return None
    taken.add(port)
    return port


def _queue_positions(s: Session, trial_ids: list[int]) -> dict[int, float]:
    """trial id -> its job's queue position (services/job_queue.py), which orders equal priorities."""
    if not trial_ids:
        return {}
    rows = s.execute(select(models.Trial.id, job_queue.POSITION)
                     .join(models.Experiment, models.Experiment.id == models.Trial.experiment_id)
                     .where(models.Trial.id.in_(set(trial_ids))))
    return {tid: position for tid, position in rows}


def _container_trials(fx: ClusterEffects, s: Session, trial_ids: list[int]) -> set[int]:
    """The trials that run in a container: their experiment, or the master's task_container_defaults,
    names an image."""
    if not trial_ids:
        return set()
    if fx.config.task_container_defaults.image is not None:
        return set(trial_ids)
    rows = s.execute(select(models.Trial.id, models.Experiment.config)
                     .join(models.Experiment, models.Experiment.id == models.Trial.experiment_id)
                     .where(models.Trial.id.in_(set(trial_ids))))
    return {tid for tid, cfg in rows if (cfg.get("environment") or {}).get("image")}


def _experiment_groups(s: Session, trial_ids: list[int]) -> dict[int, tuple[str, float, int | None]]:
    """trial id -> (experiment id as the fair-share and max_slots group, the experiment's weight, its
    resources.max_slots)."""
    if not trial_ids:
        return {}
    rows = s.execute(select(models.Trial.id, models.Experiment.id, models.Experiment.config)
                     .join(models.Experiment, models.Experiment.id == models.Trial.experiment_id)
                     .where(models.Trial.id.in_(set(trial_ids))))
    out: dict[int, tuple[str, float, int | None]] = {}
    for tid, eid, cfg in rows:
        resources = cfg.get("resources") or {}
        max_slots = resources.get("max_slots")
        out[tid] = (str(eid), float(resources.get("weight", 1.0)), int(max_slots) if max_slots is not None else None)
    return out
