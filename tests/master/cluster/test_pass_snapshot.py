"""What a scheduling pass reads: the pending allocations (with what assigning them needs), the
usable agents, the slots held, the experiments' scheduling settings; nothing more when nothing is
pending; and it reads without SQLite's write lock, so a pass never waits for writers or blocks them."""

from __future__ import annotations

import asyncio
import threading

from sqlalchemy import update
from sqlalchemy.orm import Session

from pedl.master.cluster import known_agents, pass_snapshot
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AgentState
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    experiment,
    hub_of,
    run_on,
    trials_of,
    without_chief_port,
)


def test_the_snapshot_holds_the_pending_the_usable_agents_and_the_held_slots(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1", slots=2)
    agent(s, "a2")  # not in the hub
    agent(s, "a3").enabled = False
    first = experiment(fx, s)
    running = allocations_of(s, trials_of(s, first)[0])[0]
    run_on(fx, s, running, "a1")
    exp = experiment(fx, s, slots=2, resources=", max_slots: 4, weight: 2.5")
    (trial,) = trials_of(s, exp)
    (waiting,) = allocations_of(s, trial)
    s.flush()
    snap = pass_snapshot.load(s, fx.config, hub_of(loop, "a1", "a3"))
    (row,) = snap.pending
    assert (row.id, row.task_id, row.trial_id, row.name, row.experiment_id, row.resource_pool, row.slots_needed) == (
        waiting.id,
        waiting.task_id,
        trial.id,
        waiting.name,
        exp.id,
        "default",
        2,
    )
    assert [(a.id, a.slot_ids) for a in snap.agents] == [("a1", ("a1-0", "a1-1"))]
    (held,) = snap.held
    assert (held.id, without_chief_port(held.assignment)) == (running.id, [{"agent_id": "a1", "slot_ids": ["a1-0"]}])
    settings = snap.experiments[exp.id]
    assert (settings.weight, settings.max_slots, settings.image) == (2.5, 4, False)
    assert set(snap.experiments) == {first.id, exp.id}


def test_nothing_pending_reads_nothing_else(fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop) -> None:
    agent(s, "a1")
    snap = pass_snapshot.load(s, fx.config, hub_of(loop, "a1"))
    assert (snap.pending, snap.agents, snap.held) == ([], [], [])


def test_slot_ids_are_parsed_again_when_an_agent_registers_other_slots_and_gone_agents_are_dropped() -> None:
    cache = known_agents.SlotIdsCache()
    one, two = '[{"id": "0"}]', '[{"id": "0"}, {"id": "1"}]'
    assert cache.read([("a1", "p", one, ""), ("a2", "p", one, "docker")]) == [
        ("a1", "p", ("0",), ""),
        ("a2", "p", ("0",), "docker"),
    ]
    assert cache.read([("a1", "p", two, "")]) == [("a1", "p", ("0", "1"), "")]
    assert set(cache._ids) == {"a1"}


def test_the_snapshot_is_read_while_another_transaction_holds_the_write_lock(
    fx: RecordingEffects, database: Database, loop: asyncio.AbstractEventLoop
) -> None:
    with database.session() as s:
        agent(s, "a1")
        experiment(fx, s)
    got: list[pass_snapshot.PassSnapshot] = []
    with database.session() as writer:  # a write in progress (on SQLite: BEGIN IMMEDIATE, the write lock)
        writer.execute(update(models.Agent).values(state=AgentState.DISCONNECTED))
        reader = threading.Thread(
            target=lambda: got.append(pass_snapshot.read(database, fx.config, hub_of(loop, "a1"))), daemon=True
        )
        reader.start()
        reader.join(timeout=10)
        assert not reader.is_alive(), "the snapshot waited for the writer"
        writer.rollback()
    (snap,) = got
    assert len(snap.pending) == 1 and [a.id for a in snap.agents] == ["a1"]  # as committed before the write


def test_without_fair_share_preemption_or_max_slots_only_the_held_slots_are_read(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1", slots=3)
    agent(s, "a2", slots=2)
    for agent_ids in (("a1",), ("a1", "a2")):
        run_on(fx, s, allocations_of(s, trials_of(s, experiment(fx, s, slots=2))[0])[0], *agent_ids)
    experiment(fx, s)
    s.flush()
    snap = pass_snapshot.load(s, fx.config, hub_of(loop, "a1", "a2"))
    assert snap.held == []  # the scheduler reads no running task here
    assert dict(snap.used) == {"a1": {"a1-0", "a1-1", "a1-2"}, "a2": {"a2-0"}}
