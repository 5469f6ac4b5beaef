"""Assigning a batch the pass planned outside the lock: what changed since the plan is respected
(an allocation killed or moved to another pool, an agent gone or disabled), the rest of the batch
goes on, and each assignment is written once with its event, its token and its StartTask."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.master.cluster import assignment, pass_snapshot, placement
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.wait_records import WaitUpdate
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.states import AllocationState
from pedl.master.lifecycle.task_specs import SpecCache
from pedl.master.lifecycle.tokens import token_hash
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    experiment,
    hub_of,
    trials_of,
    without_chief_port,
)

A = AllocationState


def two_planned(fx: RecordingEffects, s: Session, hub: AgentHub) -> tuple[placement.PassPlan, dict[str, str]]:
    """Two pending trials planned onto agents a1 and a2 (one slot each): the plan and {agent: allocation}."""
    agent(s, "a1")
    agent(s, "a2")
    for _ in range(2):
        experiment(fx, s)
    s.flush()
    decided = placement.decide(fx.config, pass_snapshot.load(s, fx.config, hub), fx.now)
    on = {places[0][0]: aid for aid, places in decided.placements}
    assert sorted(on) == ["a1", "a2"]
    return decided, on


def states(s: Session) -> dict[str, A]:
    return dict(s.execute(select(models.Allocation.id, models.Allocation.state)).all())


def started(fx: RecordingEffects) -> dict[str, str]:
    return {m.allocation_id: agent_id for agent_id, m in fx.sent if isinstance(m, proto.StartTask)}


def assigned_events(s: Session) -> list[str]:
    return list(s.scalars(select(models.Event.entity_id).where(models.Event.to_state == A.ASSIGNED)))


@pytest.mark.parametrize("change", ["disconnected", "left the hub", "disabled", "draining"])
def test_a_placement_on_an_agent_no_longer_usable_waits_and_the_batch_goes_on(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop, change: str
) -> None:
    hub = hub_of(loop, "a1", "a2")
    decided, on = two_planned(fx, s, hub)
    row = s.get(models.Agent, "a1")
    if change == "left the hub":
        hub.detach(hub.get("a1"))
    elif change == "disconnected":
        row.state = "STATE_DISCONNECTED"
    else:
        setattr(row, "enabled" if change == "disabled" else "draining", change == "draining")
    placement.apply_planned(fx, s, hub, decided, decided.placements, SpecCache())
    assert states(s) == {on["a1"]: A.PENDING, on["a2"]: A.ASSIGNED}
    assert started(fx) == {on["a2"]: "a2"} and assigned_events(s) == [on["a2"]]


@pytest.mark.parametrize("change", ["killed", "moved to another pool"])
def test_an_allocation_killed_or_moved_since_the_plan_is_not_assigned(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop, change: str
) -> None:
    hub = hub_of(loop, "a1", "a2")
    decided, on = two_planned(fx, s, hub)
    changed = s.get(models.Allocation, on["a1"])
    if change == "killed":
        allocations.kill(fx, s, changed, "experiment killed")
    else:
        changed.resource_pool = "other"
    placement.apply_planned(fx, s, hub, decided, decided.placements, SpecCache())
    assert states(s) == {on["a1"]: A.TERMINATED if change == "killed" else A.PENDING, on["a2"]: A.ASSIGNED}
    assert (changed.assignment, changed.session_token_hash) == ([], "")
    assert started(fx) == {on["a2"]: "a2"} and assigned_events(s) == [on["a2"]]


def test_each_assignment_is_written_once_with_its_token_event_and_start(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    hub = hub_of(loop, "a1", "a2")
    decided, on = two_planned(fx, s, hub)
    objects = {aid: s.get(models.Allocation, aid) for aid in on.values()}  # held by the session: kept current
    fx.clock.advance(3)
    cache = SpecCache()
    placement.apply_planned(fx, s, hub, decided, decided.placements, cache)
    placement.apply_planned(fx, s, hub, decided, decided.placements, cache)  # the same batch again: nothing more
    starts = {m.allocation_id: m for _, m in fx.sent if isinstance(m, proto.StartTask)}
    assert set(starts) == set(on.values()) and len(fx.sent) == 2
    for agent_id, aid in on.items():
        alloc = objects[aid]
        assert (alloc.state, alloc.assigned_at, without_chief_port(alloc.assignment)) == (
            A.ASSIGNED,
            fx.now,
            [{"agent_id": agent_id, "slot_ids": [f"{agent_id}-0"]}],
        )
        assert alloc.session_token_hash == token_hash(starts[aid].session_token)
        assert starts[aid].env["DET_ALLOCATION_ID"] == aid
    assert sorted(assigned_events(s)) == sorted(on.values())
    E = models.Event
    event = s.scalar(select(E).where(E.entity_id == on["a1"], E.to_state == A.ASSIGNED))
    assert (event.from_state, event.time, event.message, event.level) == (
        A.PENDING,
        fx.now,
        "assigned to a1['a1-0']",
        "info",
    )
    assert len({m.session_token for m in starts.values()}) == 2


def test_apply_without_a_plan_reads_the_allocations_itself(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    (alloc,) = allocations_of(s, trials_of(s, experiment(fx, s))[0])
    s.flush()
    assignment.assign(fx, s, AgentHub(), [(alloc.id, [("a1", ["a1-0"])]), ("no.such.1", [("a1", ["a1-0"])])])
    assert alloc.state == A.ASSIGNED and [aid for aid in started(fx)] == [alloc.id]


def test_an_allocation_killed_between_prepare_and_write_is_not_assigned(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    hub = hub_of(loop, "a1", "a2")
    decided, on = two_planned(fx, s, hub)
    ready = assignment.prepare(fx, s, hub, decided.placements, planned=decided.planned)
    assert sorted(ready.starts) == sorted(on.values()) and fx.sent == []  # nothing written or sent yet
    allocations.kill(fx, s, s.get(models.Allocation, on["a1"]), "experiment killed")
    s.flush()
    assert assignment.write(fx, s, ready) == {on["a2"]}
    assert states(s) == {on["a1"]: A.TERMINATED, on["a2"]: A.ASSIGNED}
    assert started(fx) == {on["a2"]: "a2"} and assigned_events(s) == [on["a2"]]


def test_a_prepared_batch_is_written_in_parts_and_only_on_agents_still_usable() -> None:
    def row(aid: str, pool: str, *agents: str) -> tuple:
        return (aid, pool, "hash", [{"agent_id": a, "slot_ids": ["0"]} for a in agents], "assigned")

    waits = [WaitUpdate("w", "default", None, None, "NO_ROOM", "why", None)]
    ready = assignment.Prepared(
        [row("x", "default", "a1"), row("y", "default", "a1", "a2"), row("z", "gpu", "a3")],
        {"x": [], "y": [], "z": []},
        waits,
    )
    assert ready.agent_ids() == {"a1", "a2", "a3"}
    first = ready.take(2)
    assert ([r[0] for r in first.assigned], set(first.starts), first.waits) == (["x", "y"], {"x", "y"}, waits)
    assert ([r[0] for r in ready.assigned], ready.waits) == (["z"], [])
    usable = first.on_usable({"a1": "default", "a2": "gpu"})  # a2 moved to another pool
    assert ([r[0] for r in usable.assigned], set(usable.starts), usable.waits) == (["x"], {"x"}, waits)
    assert first.on_usable({"a1": "default", "a2": "default"}) is first
    assert ready.on_usable({}).assigned == []
