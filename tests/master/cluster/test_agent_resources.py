"""Agents as the resource manager: AgentResources has every call of the ResourceManager protocol, and a pass
made of those calls, in the Controller's order, places a waiting trial on the one connected agent and starts it
there."""

from __future__ import annotations

import asyncio
import inspect

from pedl.common import agent_protocol as proto
from pedl.master.cluster import placement
from pedl.master.cluster.agent_resources import AgentResources
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.cluster.resource_manager import ResourceManager
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AllocationState
from pedl.master.lifecycle.task_specs import SpecCache
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    experiment,
    hub_of,
    trials_of,
)


def _calls(cls: type) -> dict[str, list[str]]:
    return {
        name: list(inspect.signature(fn).parameters)
        for name, fn in vars(cls).items()
        if inspect.isfunction(fn) and not name.startswith("_")
    }


def test_the_agents_implement_every_call_of_the_protocol() -> None:
    wanted = _calls(ResourceManager)
    assert set(wanted) == {"check", "forget", "snapshot", "prepare", "place", "deliver"}
    assert {name: params for name, params in _calls(AgentResources).items() if name in wanted} == wanted


def test_a_pass_through_the_resource_manager_places_and_starts_a_trial(
    fx: RecordingEffects, database: Database, loop: asyncio.AbstractEventLoop
) -> None:
    with database.session() as s:
        agent(s, "a1", slots=2)
        agent(s, "away", slots=8)  # its agent is not connected: no capacity
        (trial,) = trials_of(s, experiment(fx, s))
        (alloc,) = allocations_of(s, trial)
        alloc_id = alloc.id
    hub = hub_of(loop, "a1")
    hub.get("a1").last_heartbeat = fx.now  # it beats; "away" fell silent and goes
    resources: ResourceManager = AgentResources(hub, KnownAgents(database.changes))
    with database.session() as s:
        resources.check(fx, s)
    snap = resources.snapshot(database, fx.config)
    assert [a.id for a in snap.agents] == ["a1"] and [p.id for p in snap.pending] == [alloc_id]
    decided = placement.decide(fx.config, snap, fx.now)
    assert decided.placements == [(alloc_id, [("a1", ["a1-0"])])]
    with database.read_session() as s:
        ready = resources.prepare(fx, s, decided, decided.placements, SpecCache())
    with database.session() as s:
        resources.place(fx, s, ready)
    with database.session() as s:
        assert s.get(models.Allocation, alloc_id).state == AllocationState.ASSIGNED
    ((agent_id, start),) = fx.sent
    assert agent_id == "a1" and isinstance(start, proto.StartTask) and start.allocation_id == alloc_id
    assert resources.deliver("a1", start) and not resources.deliver("away", start)
