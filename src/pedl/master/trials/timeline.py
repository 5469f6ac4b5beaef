"""A trial's timeline: each of its allocations (one per start or restart) with where it ran (agents,
and the instance behind each when a provisioner launched it), when it queued, started and ended, and
why it ended: an exit, a preemption, a kill, or its spot instance's interruption."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from pedl.master.db import models
from pedl.master.provisioner.moves import moves_of_trial
from pedl.master.trials.service import get

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_ALLOCATIONS = 1000  # a trial restarts at most max_restarts times, but preemptions add more


def _instance(inst: models.Instance | None) -> dict[str, Any] | None:
    if inst is None:
        return None
    return {
        "id": inst.id,
        "instanceType": inst.instance_type,
        "spot": inst.spot,
        "state": inst.state,
        "interruptedAt": inst.interrupted_at,
        "terminationReason": inst.termination_reason,
    }


def timeline(ctx: MasterContext, trial_id: int) -> list[dict[str, Any]]:
    with ctx.db.read_session() as s:
        get(s, trial_id)
        rows = list(
            s.scalars(
                select(models.Allocation)
                .where(models.Allocation.trial_id == trial_id)
                .order_by(models.Allocation.queued_at, models.Allocation.id)
                .limit(MAX_ALLOCATIONS)
            )
        )
        agent_ids = {p["agent_id"] for al in rows for p in (al.assignment or [])}
        instances = (
            {i.id: i for i in s.scalars(select(models.Instance).where(models.Instance.id.in_(agent_ids)))}
            if agent_ids
            else {}
        )
        moved = moves_of_trial(s, trial_id)
    out = []
    for al in rows:
        places = [
            {
                "agentId": p["agent_id"],
                "slots": len(p.get("slot_ids", [])),
                "instance": _instance(instances.get(p["agent_id"])),
            }
            for p in (al.assignment or [])
        ]
        interrupted = any(pl["instance"] and pl["instance"]["interruptedAt"] for pl in places)
        out.append(
            {
                "id": al.id,
                "state": al.state,
                "resourcePool": al.resource_pool,
                "slots": al.slots_needed,
                "queuedAt": al.queued_at,
                "startedAt": al.started_at,
                "endedAt": al.ended_at,
                "exitCode": al.exit_code,
                "exitReason": al.exit_reason,
                "preempted": al.preempt_requested,
                "killed": al.kill_requested,
                "spotInterrupted": interrupted,
                "waitReason": al.wait_reason,
                "places": places,
                "moved": moved.get(al.id),
            }
        )  # "moved from instance X to Y to save $Z/h", when it was
    return out
