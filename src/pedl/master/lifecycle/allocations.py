"""Allocation operations: a trial's new allocation, kill, preempt, and recording how one ended.

Each runs inside the caller's transaction under the cluster lock and reaches beyond it only through
the effects protocol. What an ending means for the trial and its experiment is decided by
lifecycle/progression.py, which calls `terminate` here first."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.master.db import models
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import HELD, AllocationState
from pedl.master.lifecycle.transitions import record_event, set_allocation_state

A = AllocationState

# the exit reason of an allocation whose start never reached its agent: not the task's fault, so the
# trial is queued again without counting a restart
NOT_STARTED = "start was not delivered to the agent"
DEFAULT_PRIORITY = 42


@dataclass(frozen=True)
class Ending:
    """How a whole allocation ended: the exit code (None: its process never ran or was lost) and why."""

    exit_code: int | None
    reason: str


def agents_of(alloc: models.Allocation, running_only: bool = False) -> list[str]:
    """The agents an allocation is placed on (with `running_only`, those whose process has not exited)."""
    return [p["agent_id"] for p in alloc.assignment or [] if not (running_only and p.get("exited"))]


def held_on(s: Session, agent_id: str, running_only: bool = False) -> list[models.Allocation]:
    """Allocations that hold slots on an agent (with `running_only`, those whose process there has
    not exited: a distributed allocation's rank may end before the others)."""
    rows = s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD)))
    return [a for a in rows if agent_id in agents_of(a, running_only)]


def live_allocation(s: Session, trial: models.Trial) -> models.Allocation | None:
    """The trial's allocation that has not terminated, if any (the newest)."""
    return s.scalar(
        select(models.Allocation)
        .where(models.Allocation.trial_id == trial.id, models.Allocation.state != A.TERMINATED)
        .order_by(models.Allocation.queued_at.desc())
    )


def new(fx: ClusterEffects, s: Session, exp: models.Experiment, trial: models.Trial) -> models.Allocation:
    """Queue the trial's next run: a PENDING allocation in its experiment's pool."""
    resources = exp.config.get("resources") or {}
    pool = fx.config.pool(exp.resource_pool)
    priority = resources.get("priority") or (pool.scheduler.default_priority if pool else DEFAULT_PRIORITY)
    now = fx.now
    trial.run_id += 1
    alloc = models.Allocation(
        id=f"{trial.task_id}.{trial.run_id}",
        task_id=trial.task_id,
        trial_id=trial.id,
        name=f"Trial {trial.id} (Experiment {exp.id})",
        state=A.PENDING,
        resource_pool=exp.resource_pool,
        slots_needed=int(resources.get("slots_per_trial", 1)),
        priority=priority,
        assignment=[],
        session_token_hash="",
        owner_id=exp.owner_id,
        queued_at=now,
    )
    s.add(alloc)
    record_event(
        s,
        now,
        "allocation",
        alloc.id,
        f"waiting for {alloc.slots_needed} slot(s) in pool {alloc.resource_pool}",
        to_state=A.PENDING,
    )
    fx.wake()
    return alloc


def new_generic(fx: ClusterEffects, s: Session, task: models.GenericTask) -> models.Allocation:
    """Queue a command's, notebook's, shell's or TensorBoard's one run: a PENDING allocation in the pool
    of its (effective) config."""
    resources = task.config["resources"]
    now = fx.now
    alloc = models.Allocation(
        id=f"{task.id}.1",
        task_id=task.id,
        trial_id=None,
        name=task.description,
        state=A.PENDING,
        resource_pool=resources["resource_pool"],
        slots_needed=int(resources["slots"]),
        priority=int(resources["priority"]),
        assignment=[],
        session_token_hash="",
        owner_id=task.owner_id,
        queued_at=now,
    )
    s.add(alloc)
    record_event(
        s,
        now,
        "allocation",
        alloc.id,
        f"waiting for {alloc.slots_needed} slot(s) in pool {alloc.resource_pool}",
        to_state=A.PENDING,
    )
    fx.wake()
    return alloc


def kill(fx: ClusterEffects, s: Session, alloc: models.Allocation, reason: str, *, keep_failure: bool = False) -> None:
    """End an allocation: drop it if not yet running, else signal its agents. `keep_failure`
    stops the other ranks of a failed distributed allocation without calling it a kill."""
    now = fx.now
    if alloc.state == A.PENDING:
        set_allocation_state(s, now, alloc, A.TERMINATED, reason)
        alloc.ended_at, alloc.exit_reason = now, reason
        return
    if alloc.state == A.TERMINATED:
        return
    if not keep_failure:
        alloc.kill_requested = True
    if alloc.state != A.TERMINATING:
        set_allocation_state(s, now, alloc, A.TERMINATING, reason)
    for agent_id in agents_of(alloc, running_only=True):
        fx.send(
            agent_id,
            proto.KillTask(allocation_id=alloc.id, reason=reason, grace_period=fx.config.task_kill_grace_period),
        )


def preempt(fx: ClusterEffects, s: Session, alloc: models.Allocation, reason: str) -> None:
    """Ask a running task to checkpoint and exit; a pending one is simply dropped."""
    if alloc.state == A.PENDING:
        kill(fx, s, alloc, reason)
        return
    if alloc.state in (A.ASSIGNED, A.RUNNING) and not alloc.preempt_requested:
        alloc.preempt_requested = True
        fx.signal_preemption(alloc.id)
        record_event(s, fx.now, "allocation", alloc.id, f"preemption requested: {reason}")


def placement_exited(
    fx: ClusterEffects, s: Session, alloc: models.Allocation, agent_id: str, exit_code: int | None, reason: str
) -> Ending | None:
    """One agent's process of an allocation ended. A distributed allocation ends when all of its
    processes have; the first failure stops the others (they cannot go on without it). Returns how
    the whole allocation ended once it has, else None."""
    places = [dict(p) for p in alloc.assignment or []]
    if len(places) <= 1:
        return Ending(exit_code, reason)
    order = sum(1 for p in places if p.get("exited"))
    for p in places:
        if p["agent_id"] == agent_id and not p.get("exited"):
            p.update(exited=True, exit_code=exit_code, reason=reason, order=order)
    alloc.assignment = places  # a new list: JSON columns track assignment, not mutation
    if exit_code != 0 and not alloc.kill_requested:
        kill(fx, s, alloc, f"rank on agent {agent_id} ended ({exit_code}); stopping the others", keep_failure=True)
    if not all(p.get("exited") for p in places):
        return None
    failures = sorted((p for p in places if p.get("exit_code") != 0), key=lambda p: p["order"])
    if not failures:
        return Ending(0, "")
    failed = failures[0]  # the first to fail is the cause
    rank = places.index(failed)
    return Ending(
        failed.get("exit_code"),
        f"rank {rank} on agent {failed['agent_id']}" + (f": {failed['reason']}" if failed.get("reason") else ""),
    )


def terminate(fx: ClusterEffects, s: Session, alloc: models.Allocation, exit_code: int | None, reason: str) -> str:
    """Record that an allocation ended (stopping ranks still running elsewhere); returns the reason
    as recorded."""
    now = fx.now
    if exit_code == 0:
        # a process that ends cleanly when killed (Jupyter on SIGTERM) still ended because of the kill
        why = "exited with code 0" + (f": {reason}" if alloc.kill_requested and reason else "")
    elif exit_code is None:
        why = reason or "ended before its process ran"
    else:
        why = f"exited with code {exit_code}" + (f": {reason}" if reason else "")
    if len(alloc.assignment or []) > 1:
        for agent_id in agents_of(alloc, running_only=True):  # ranks still running elsewhere
            fx.send(
                agent_id,
                proto.KillTask(allocation_id=alloc.id, reason=why, grace_period=fx.config.task_kill_grace_period),
            )
    set_allocation_state(s, now, alloc, A.TERMINATED, why)
    alloc.ended_at, alloc.exit_code, alloc.exit_reason = now, exit_code, why
    fx.allocation_closed(alloc.id)
    # the end in the log, in Determined's words too, which `det cmd run`'s and `det e create --test`'s users and
    # Determined's e2e suite look for
    generic = alloc.trial_id is None
    if exit_code != 0 and not alloc.kill_requested:
        said = ": resources failed with non-zero exit code" if exit_code is not None else ""
        logs.add_master_line(s, now, alloc, f"allocation {alloc.id} {why}{said}", level="LOG_LEVEL_ERROR")
    elif exit_code == 0 and not alloc.kill_requested and generic:
        logs.add_master_line(
            s, now, alloc, f"allocation {alloc.id}: resources exited successfully with a zero exit code"
        )
    return why


def fail_unschedulable(fx: ClusterEffects, s: Session, alloc: models.Allocation, reason: str) -> None:
    """End a pending allocation no allowed instance type can ever hold."""
    now = fx.now
    set_allocation_state(s, now, alloc, A.TERMINATED, f"can never be scheduled: {reason}")
    alloc.ended_at, alloc.exit_reason = now, reason
    fx.allocation_closed(alloc.id)
    logs.add_master_line(s, now, alloc, f"trial cannot be scheduled: {reason}", level="LOG_LEVEL_ERROR")
