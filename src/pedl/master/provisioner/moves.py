"""The move planner in the live provisioner: load what `plan_moves` needs from the database, record its
plan and carry it out inside the provisioner's pass. An instance to empty drains (the scheduler places
nothing new there); each trial to move is asked to checkpoint and leave through the preemption path,
so it is placed again from its checkpoint; a drained instance ends once nothing is held on it; spot
replacements join the pass's launches. While work waits, the only moves are yields (yielding.py): a
long trial gives its slots to new work waiting for a boot, and its next allocation queues behind that
work (`resumes_yield`). Every move is a `trial_moves` row (the budget, counted over the last hour,
survives a restart) and an event on the trial and its experiment."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from pedl.config.provider_config import ProviderConfig
from pedl.master.cluster.wait_reasons import WaitKind
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.states import HELD, LIVE_INSTANCE, AgentState, AllocationState, InstanceState
from pedl.master.lifecycle.transitions import record_event
from pedl.scheduling.consolidation import (
    HOUR,
    HostView,
    MovePlan,
    SpotOffer,
    TaskView,
    plan_moves,
    policy_from_config,
)
from pedl.scheduling.scaling_decider import Decision, Launch
from pedl.scheduling.yielding import WaitingTask, plan_yields

if TYPE_CHECKING:
    from pedl.master.lifecycle.effects import ClusterEffects

RECENT_MOVES_SHOWN = 20
IN_CHUNK = 500  # ids per IN (...) list


def drained_and_empty(s: Session, pool: str, held_on: dict[str, int]) -> list[tuple[str, str]]:
    """Draining or cordoned instances of the pool that hold nothing any more: they end now."""
    rows = s.scalars(
        select(models.Instance).where(
            models.Instance.resource_pool == pool,
            models.Instance.state == InstanceState.RUNNING,
            or_(models.Instance.draining_since.is_not(None), models.Instance.cordoned_since.is_not(None)),
        )
    )
    return [
        (
            r.id,
            f"drained: {r.drain_reason}"
            if r.draining_since is not None
            else "on-demand and empty while spot capacity is available",
        )
        for r in rows
        if r.id not in held_on
    ]


def remaining_seconds(trial: models.Trial, now: float) -> float | None:
    """The trial's expected remaining run time from its searcher length and its progress: batches
    left at the rate it trained so far. None when there is nothing to go by yet."""
    if trial.target_length <= 0 or trial.total_batches <= 0:
        return None
    elapsed = now - trial.start_time
    if elapsed <= 0:
        return None
    left = max(trial.target_length - trial.total_batches, 0)
    return left * elapsed / trial.total_batches


def consolidate(
    fx: ClusterEffects,
    s: Session,
    pool: str,
    cfg: ProviderConfig,
    decision: Decision,
    blocked: set[tuple[str, bool]],
    connected: set[str],
    *,
    scheduler: str = "priority",
) -> MovePlan | None:
    """Plan and carry out the pool's moves in the provisioner's transaction (its cloud calls follow).
    While work waits, only yields to new work (in a pool whose scheduler queues by priority and
    arrival, so that the freed slots go where they were freed for)."""
    now = fx.now
    held = list(
        s.scalars(
            select(models.Allocation).where(models.Allocation.state.in_(HELD), models.Allocation.resource_pool == pool)
        )
    )
    held_on: dict[str, int] = {}
    for alloc in held:
        for place in alloc.assignment or []:
            held_on[place["agent_id"]] = held_on.get(place["agent_id"], 0) + len(place.get("slot_ids", []))
    ending = {i for i, _ in decision.terminate}
    for inst_id, reason in drained_and_empty(s, pool, held_on):
        if inst_id not in ending:
            decision.terminate.append((inst_id, reason))
    ending = {i for i, _ in decision.terminate}  # with the drained ones: the planner sees them no more
    policy = policy_from_config(cfg.consolidation, getattr(cfg, "boot_delay", None))  # a local pool's boot
    if not policy.enabled:
        for row in s.scalars(
            select(models.Instance).where(
                models.Instance.resource_pool == pool, models.Instance.cordoned_since.is_not(None)
            )
        ):
            row.cordoned_since = None  # consolidation switched off: every instance takes work
        return None
    waiting = _waiting(s, pool)
    if waiting and not (policy.yield_to_new_work and scheduler == "priority"):
        return None  # queued work comes first; moves wait for a quiet pool
    rows = list(
        s.scalars(
            select(models.Instance).where(
                models.Instance.resource_pool == pool, models.Instance.state.in_(LIVE_INSTANCE)
            )
        )
    )
    agents = {a.id: a for a in s.scalars(select(models.Agent).where(models.Agent.id.in_([r.id for r in rows])))}
    hosts = []
    for row in rows:
        if row.id in ending or row.state == InstanceState.TERMINATING or row.interrupted_at is not None:
            continue
        agent = agents.get(row.id)
        ready = (
            row.state == InstanceState.RUNNING
            and agent is not None
            and agent.state == AgentState.CONNECTED
            and row.id in connected
        )
        slots = len(agent.slots) if agent is not None else row.slots
        price = cfg.spot_price_of(row.instance_type) if row.spot else row.price_per_hour
        hosts.append(
            HostView(
                row.id,
                row.instance_type,
                slots,
                max(slots - held_on.get(row.id, 0), 0) if ready else slots,
                price,
                row.spot,
                ready,
                row.draining_since is not None,
                row.launched_at,
            )
        )
    if not hosts:
        return None
    tasks = _tasks(s, [a for a in held if a.state == AllocationState.RUNNING], now)
    recent = list(
        s.scalars(
            select(models.TrialMove.planned_at).where(
                models.TrialMove.resource_pool == pool, models.TrialMove.planned_at > now - HOUR
            )
        )
    )
    if waiting:
        open_hosts = {h.id for h in hosts if h.ready and not h.draining}
        leaving: dict[str, int] = {}  # slots that moves under way will free where new work may go
        for alloc in held:
            if alloc.preempt_requested:
                for place in alloc.assignment or []:
                    if place["agent_id"] in open_hosts:
                        leaving[place["agent_id"]] = leaving.get(place["agent_id"], 0) + len(place["slot_ids"])
        plan = MovePlan(moves=plan_yields(now, policy, hosts, tasks, waiting, recent_moves=recent, leaving=leaving))
        _record_moves(fx, s, pool, plan, held)
        return plan
    offers = []
    if getattr(cfg, "spot", False):
        offers = [
            SpotOffer(t, cfg.slots_of(t), cfg.spot_price_of(t))
            for t in cfg.instance_types()
            if (t, True) not in blocked
        ]
    alive = len([h for h in hosts if not h.draining])
    plan = plan_moves(
        now,
        policy,
        hosts,
        tasks,
        recent_moves=recent,
        spot_offers=offers,
        max_new_instances=max(cfg.max_instances - alive - sum(n.count for n in decision.launch), 0),
    )
    _carry_out(fx, s, pool, cfg, plan, held, decision, hosts, spot_available=bool(offers))
    return plan


def _tasks(s: Session, running: list[models.Allocation], now: float) -> list[TaskView]:
    trial_ids = [a.trial_id for a in running if a.trial_id is not None]
    trials = (
        {t.id: t for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(trial_ids)))} if trial_ids else {}
    )
    exp_ids = {t.experiment_id for t in trials.values()}
    movable_exp = (
        {
            e.id: bool(((e.config or {}).get("resources") or {}).get("movable", True))
            for e in s.scalars(select(models.Experiment).where(models.Experiment.id.in_(exp_ids)))
        }
        if exp_ids
        else {}
    )
    out = []
    for alloc in running:
        trial = trials.get(alloc.trial_id) if alloc.trial_id is not None else None
        placements = tuple((p["agent_id"], len(p.get("slot_ids", []))) for p in alloc.assignment or [])
        if trial is None:  # a command or another task without a checkpoint: never moved
            out.append(TaskView(alloc.id, placements, False, None, alloc.started_at or now))
            continue
        movable = (
            trial.latest_checkpoint is not None
            and movable_exp.get(trial.experiment_id, True)
            and not alloc.preempt_requested
            and not alloc.kill_requested
        )
        out.append(
            TaskView(
                alloc.id,
                placements,
                movable,
                remaining_seconds(trial, now),
                alloc.started_at or alloc.assigned_at or now,
                alloc.priority,
            )
        )
    return out


def _carry_out(
    fx: ClusterEffects,
    s: Session,
    pool: str,
    cfg: ProviderConfig,
    plan: MovePlan,
    held: list[models.Allocation],
    decision: Decision,
    hosts: list[HostView],
    *,
    spot_available: bool,
) -> None:
    now = fx.now
    cordon = dict(plan.cordon)
    for host in hosts:  # the plan says which on-demand instances take no new work now; the others take it
        row = s.get(models.Instance, host.id)
        if row is None or host.draining:
            continue  # a draining instance takes no new work either way; its cordon stays on its record
        if host.id in cordon and row.cordoned_since is None:
            row.cordoned_since = now
            record_event(s, now, "instance", host.id, f"cordoned: {cordon[host.id]}")
        elif host.id not in cordon and row.cordoned_since is not None:
            row.cordoned_since = None
            record_event(
                s,
                now,
                "instance",
                host.id,
                "takes new work again" if spot_available else "takes new work again: spot capacity is unavailable",
            )
    for inst_id, reason in plan.drain:
        row = s.get(models.Instance, inst_id)
        if row is not None and row.draining_since is None:
            row.draining_since, row.drain_reason = now, reason
            record_event(s, now, "instance", inst_id, f"draining: {reason}")
    _record_moves(fx, s, pool, plan, held)
    for instance_type, count, reason in plan.launch:
        decision.launch.append(Launch(instance_type, count, True, cfg.slots_of(instance_type)))
        record_event(s, now, "pool", pool, reason)


def _record_moves(fx: ClusterEffects, s: Session, pool: str, plan: MovePlan, held: list[models.Allocation]) -> None:
    """Each planned move: its row, an event on the trial, and the preemption that carries it out."""
    now = fx.now
    by_id = {a.id: a for a in held}
    for move in plan.moves:
        alloc = by_id.get(move.allocation_id)
        if alloc is None:
            continue
        s.add(
            models.TrialMove(
                resource_pool=pool,
                allocation_id=alloc.id,
                trial_id=alloc.trial_id,
                source=",".join(move.source),
                target=",".join(move.target),
                saving_per_hour=move.saving_per_hour,
                saving=move.saving,
                reason=move.reason,
                planned_at=now,
                yield_to=move.yield_to,
            )
        )
        if alloc.trial_id is not None:
            record_event(s, now, "trial", alloc.trial_id, move.reason)
        allocations.preempt(fx, s, alloc, move.reason)


def _waiting(s: Session, pool: str) -> list[WaitingTask]:
    """The pool's queued work that the provisioner serves (not what its experiment's max_slots holds
    back), in priority and arrival order; a trial with a checkpoint has something to resume from, so
    it is not new work."""
    A = models.Allocation
    rows = s.execute(
        select(A.id, A.slots_needed, A.priority, models.Trial.latest_checkpoint)
        .outerjoin(models.Trial, models.Trial.id == A.trial_id)
        .where(
            A.state == AllocationState.PENDING,
            A.resource_pool == pool,
            or_(A.wait_kind.is_(None), A.wait_kind != WaitKind.MAX_SLOTS),
        )
        .order_by(A.priority, A.queued_at, A.id)
    ).all()
    return [
        WaitingTask(alloc_id, slots, checkpoint is None, priority) for alloc_id, slots, priority, checkpoint in rows
    ]


def resumes_yield(s: Session, pending: Sequence[Any]) -> set[str]:
    """The pending allocations that resume a trial whose previous allocation yielded its slots to new
    work: they queue from their own arrival, behind that work, not at their experiment's place.
    (A trial's allocations are named task.run, run counting from 1: allocations.new.)"""
    previous: dict[str, str] = {}
    for alloc in pending:
        task_id, _, run = alloc.id.rpartition(".")
        if alloc.trial_id is not None and run.isdigit() and int(run) > 1:
            previous[f"{task_id}.{int(run) - 1}"] = alloc.id
    ids, out = list(previous), set()
    for i in range(0, len(ids), IN_CHUNK):
        out.update(
            previous[a]
            for a in s.scalars(
                select(models.TrialMove.allocation_id).where(
                    models.TrialMove.allocation_id.in_(ids[i : i + IN_CHUNK]), models.TrialMove.yield_to.is_not(None)
                )
            )
        )
    return out


def recent_moves(s: Session, pool: str) -> list[dict[str, Any]]:
    """The pool's latest moves, newest first, for `pedl resource-pool describe`."""
    rows = s.scalars(
        select(models.TrialMove)
        .where(models.TrialMove.resource_pool == pool)
        .order_by(models.TrialMove.planned_at.desc(), models.TrialMove.id.desc())
        .limit(RECENT_MOVES_SHOWN)
    )
    return [
        {
            "trialId": m.trial_id,
            "allocationId": m.allocation_id,
            "from": m.source.split(","),
            "to": m.target.split(","),
            "savingPerHour": m.saving_per_hour,
            "saving": m.saving,
            "reason": m.reason,
            "at": m.planned_at,
        }
        for m in rows
    ]


def moves_of_trial(s: Session, trial_id: int) -> dict[str, str]:
    """allocation id -> the reason it was moved, for the trial's timeline."""
    return {
        m.allocation_id: m.reason
        for m in s.scalars(select(models.TrialMove).where(models.TrialMove.trial_id == trial_id).limit(1000))
    }
