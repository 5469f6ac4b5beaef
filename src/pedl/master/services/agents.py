"""Agents as the API shows them (det agent list / slot list: which allocation holds each slot),
and the task logs an agent streams in over its socket."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from pedl.master.db import models
from pedl.master.lifecycle import HELD
from pedl.master.services import logs

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def listing(ctx: MasterContext) -> list[tuple[models.Agent, dict[str, str], bool]]:
    """Each agent, the allocation holding each of its slots (slot id -> allocation id) and whether
    it is connected now."""
    connected = ctx.hub.connected_ids()
    with ctx.db.session() as s:
        held: dict[str, dict[str, str]] = {}
        for alloc in s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))):
            for place in alloc.assignment or []:
                for sid in place["slot_ids"]:
                    held.setdefault(place["agent_id"], {})[sid] = alloc.id
        agents = list(s.scalars(select(models.Agent).order_by(models.Agent.id)))
        return [(a, held.get(a.id, {}), a.id in connected) for a in agents]


def store_logs(ctx: MasterContext, agent_id: str, allocation_id: str, lines: list[Any]) -> None:
    """Lines an agent sends for one of its allocations; dropped when the allocation is unknown."""
    with ctx.db.session() as s:
        alloc = s.get(models.Allocation, allocation_id)
        if alloc is not None:
            logs.add_task_lines(s, alloc, agent_id, lines)
