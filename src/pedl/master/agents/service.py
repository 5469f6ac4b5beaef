"""Agents as the API shows them (det agent list / slot list: which allocation holds each slot), an
admin enabling or disabling one or one of its slots (det agent|slot enable / disable [--drain]), and
the task logs an agent streams in over its socket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import NotFound
from pedl.master.agents import to_wire
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.identity.authz import require_admin
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle import log_lines as logs
from pedl.master.lifecycle.states import HELD
from pedl.master.lifecycle.transitions import record_event
from pedl.master.wire.agent import Agent

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def listing(ctx: MasterContext) -> list[Agent]:
    """Each agent, with the allocation holding each of its slots and whether it is connected now."""
    connected = ctx.hub.connected_ids()
    with ctx.db.session() as s:
        held: dict[str, dict[str, str]] = {}
        for alloc in s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))):
            for place in alloc.assignment or []:
                for sid in place["slot_ids"]:
                    held.setdefault(place["agent_id"], {})[sid] = alloc.id
        agents = list(s.scalars(select(models.Agent).order_by(models.Agent.id)))
        return [to_wire.agent(a, held.get(a.id, {}), a.id in connected) for a in agents]


def one(ctx: MasterContext, agent_id: str) -> Agent:
    """The listing's entry of one agent."""
    found = next((a for a in listing(ctx) if a.id == agent_id), None)
    if found is None:
        raise NotFound(f"agentId: agent {agent_id!r} not found")
    return found


def set_enabled(ctx: MasterContext, who: Caller, agent_id: str, *, enabled: bool, drain: bool = False) -> Agent:
    """Enable an agent, or disable it: no task is placed on a disabled agent. Without `drain` the
    tasks it runs are preempted (they checkpoint and queue again, as for a spot interruption, not
    counted as failures); with `drain` they run to their end. Admins only. -> the agent now."""

    def change(s: Session) -> None:
        require_admin(who, f"{'enable' if enabled else 'disable'} agents")
        agent = s.get(models.Agent, agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found")
        agent.enabled, agent.draining = enabled, (not enabled and drain)
        verb = "enabled" if enabled else "disabled, its tasks running to their end" if drain else "disabled"
        record_event(s, ctx.clock.now(), "agent", agent_id, f"{verb} by {who.user.username}")
        if not enabled and not drain:
            for alloc in allocations.held_on(s, agent_id, running_only=True):
                allocations.preempt(ctx.controller, s, alloc, f"agent {agent_id} disabled by {who.user.username}")

    ctx.controller.run(change)
    ctx.controller.wake()
    ctx.controller.wake_provisioners()
    return one(ctx, agent_id)


def set_slot_enabled(
    ctx: MasterContext, who: Caller, agent_id: str, slot_id: str, *, enabled: bool, drain: bool = False
) -> Agent:
    """det slot enable / disable: as for the agent, one slot; the scheduler places nothing on a
    disabled slot, and without `drain` the task holding it is preempted. The flags live in the slot's
    entry of the agent's slots column and outlast its reconnections. Admins only. -> the agent now."""

    def change(s: Session) -> None:
        require_admin(who, f"{'enable' if enabled else 'disable'} slots")
        agent = s.get(models.Agent, agent_id)
        if agent is None:
            raise NotFound(f"agent {agent_id!r} not found")
        if not any(sl["id"] == slot_id for sl in agent.slots or []):
            raise NotFound(f"slotId: agent {agent_id!r} has no slot {slot_id!r}")
        flags = {"enabled": enabled, "draining": not enabled and drain}
        agent.slots = [{**sl, **flags} if sl["id"] == slot_id else sl for sl in agent.slots]  # a new list: stored
        verb = "enabled" if enabled else "disabled, its task running to its end" if drain else "disabled"
        record_event(s, ctx.clock.now(), "agent", agent_id, f"slot {slot_id} {verb} by {who.user.username}")
        if not enabled and not drain:
            for alloc in allocations.held_on(s, agent_id, running_only=True):
                if any(p["agent_id"] == agent_id and slot_id in p["slot_ids"] for p in alloc.assignment or []):
                    allocations.preempt(
                        ctx.controller, s, alloc, f"slot {slot_id} of agent {agent_id} disabled by {who.user.username}"
                    )

    ctx.controller.run(change)
    ctx.controller.wake()
    return one(ctx, agent_id)


def store_logs(ctx: MasterContext, agent_id: str, allocation_id: str, lines: list[Any]) -> None:
    """Lines an agent sends for one of its allocations; dropped when the allocation is unknown."""
    with ctx.db.session() as s:
        alloc = s.get(models.Allocation, allocation_id)
        if alloc is not None:
            logs.add_task_lines(s, alloc, agent_id, lines)
