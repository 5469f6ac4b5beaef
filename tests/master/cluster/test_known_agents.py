"""The agents' rows kept from one scheduling pass to the next: read once while only the pass's own
heartbeats were written (QUIET), read again after any other commit to the agents table (an agent
changed, disabled, drained, new, gone or deleted), forgotten when the pass's write rolls back; and
through the controller, the next pass sees each of those changes."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import delete, event, select, update

from pedl.clock import ManualClock
from pedl.common import agent_protocol as proto
from pedl.config.master_config import MasterConfig
from pedl.master.cluster import agent_events, pass_snapshot
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.change_counters import QUIET
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AgentState, AllocationState
from pedl.master.wiring import build_context
from tests.master.lifecycle.recording_effects import RecordingEffects, agent, experiment, hub_of


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def rows(known: KnownAgents, database: Database) -> dict[str, tuple]:
    with database.read_session() as s:
        return {aid: (a.state, a.resource_pool, a.slot_ids, a.usable) for aid, a in known.rows(s).items()}


def test_the_rows_are_read_once_while_only_quiet_heartbeats_are_written(database: Database) -> None:
    with database.session() as s:
        agent(s, "a1", slots=2)
    known = KnownAgents(database.changes)
    assert rows(known, database) == {"a1": ("CONNECTED", "default", ("a1-0", "a1-1"), True)}
    with database.session() as s:
        s.execute(update(models.Agent).values(last_heartbeat=5.0), execution_options=QUIET)
    rows(known, database)
    assert known.reads == 1
    with database.session() as s:
        s.execute(update(models.Agent).values(last_heartbeat=6.0))  # not marked QUIET: anything may have changed
    rows(known, database)
    assert known.reads == 2


@pytest.mark.parametrize("change", ["slots", "pool", "disabled", "draining", "disconnected", "gone", "deleted"])
def test_any_other_commit_to_the_agents_is_seen_by_the_next_read(database: Database, change: str) -> None:
    with database.session() as s:
        agent(s, "a1")
        agent(s, "a2")
    known = KnownAgents(database.changes)
    before = rows(known, database)
    with database.session() as s:
        a1 = s.get(models.Agent, "a1")
        if change == "slots":
            a1.slots = [{"id": "x", "type": "cuda"}, {"id": "y", "type": "cuda"}]
        elif change == "pool":
            a1.resource_pool = "other"
        elif change == "disabled":
            a1.enabled = False
        elif change == "draining":
            a1.draining = True
        elif change == "disconnected":
            a1.state = AgentState.DISCONNECTED
        elif change == "gone":
            a1.state = AgentState.GONE
        else:
            s.execute(delete(models.Agent).where(models.Agent.id == "a1"))
    after = rows(known, database)
    assert known.reads == 2
    assert after["a2"] == before["a2"]
    expected = {
        "slots": ("CONNECTED", "default", ("x", "y"), True),
        "pool": ("CONNECTED", "other", ("a1-0",), True),
        "disabled": ("CONNECTED", "default", ("a1-0",), False),
        "draining": ("CONNECTED", "default", ("a1-0",), False),
        "disconnected": ("DISCONNECTED", "default", ("a1-0",), False),
    }.get(change)
    assert after.get("a1") == expected


def test_a_new_agent_is_seen_and_a_rolled_back_write_reads_nothing_stale(database: Database) -> None:
    with database.session() as s:
        agent(s, "a1")
    known = KnownAgents(database.changes)
    rows(known, database)
    with database.session() as s:
        agent(s, "a2")
    assert set(rows(known, database)) == {"a1", "a2"}
    with pytest.raises(RuntimeError), database.session() as s:
        agent(s, "a3")
        raise RuntimeError("rolled back")
    assert set(rows(known, database)) == {"a1", "a2"} and known.reads == 2  # a rollback changes nothing


def test_check_agents_keeps_the_rows_valid_with_the_heartbeats_it_writes(
    fx: RecordingEffects, database: Database, loop: asyncio.AbstractEventLoop
) -> None:
    with database.session() as s:
        agent(s, "a1")
        agent(s, "a2")
    hub = hub_of(loop, "a1", "a2")
    known = KnownAgents(database.changes)
    for beat in (1.0, 2.0, 3.0):
        fx.clock.set(beat)
        hub.get("a1").last_heartbeat = hub.get("a2").last_heartbeat = beat
        with database.session() as s:
            agent_events.check_agents(fx, s, hub, known)
    assert known.reads == 1
    with database.read_session() as s:
        assert {a.id: a.last_heartbeat for a in s.query(models.Agent)} == {"a1": 3.0, "a2": 3.0}
        assert {aid: a.last_heartbeat for aid, a in known.rows(s).items()} == {"a1": 3.0, "a2": 3.0}
    hub.get("a1").last_heartbeat = 3.5
    with pytest.raises(RuntimeError), database.session() as s:  # the pass's transaction fails after the write
        agent_events.check_agents(fx, s, hub, known)
        known.forget()  # as the controller does when it fails
        raise RuntimeError("rolled back")
    with database.session() as s:
        agent_events.check_agents(fx, s, hub, known)  # reads again, and writes the beat again
    with database.read_session() as s:
        assert s.get(models.Agent, "a1").last_heartbeat == 3.5
    hub.detach(hub.get("a2"))  # its connection is gone: DISCONNECTED, a loud write
    with database.session() as s:
        agent_events.check_agents(fx, s, hub, known)
    assert rows(known, database)["a2"][0] == "DISCONNECTED" and known.reads == 3  # after the forget: 2


# -- through the controller: the next pass sees each change ------------------------------------


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database) -> MasterContext:
    return build_context(master_config, database, ManualClock(1_000_000.0), cluster_id="c1")


def connect(ctx: MasterContext, loop: asyncio.AbstractEventLoop, agent_id: str, slots: int = 1) -> AgentConnection:
    conn = AgentConnection(
        agent_id=agent_id, master_url="http://m:8080", remote_host="10.0.0.5", loop=loop, last_heartbeat=ctx.clock.now()
    )
    ctx.hub.attach(conn)
    ctx.controller.agent_registered(
        proto.Register(
            agent_id=agent_id,
            hostname=agent_id,
            address="10.0.0.5",
            slots=[proto.SlotInfo(id=str(i), type="cuda") for i in range(slots)],
        ),
        "10.0.0.5",
    )
    return conn


def submit(ctx: MasterContext, n: int = 1) -> None:
    ctl = ctx.controller
    for _ in range(n):
        ctl.run(lambda s: experiment(ctl, s))


def assigned(ctx: MasterContext) -> dict[str, int]:
    """The slots assigned on each agent."""
    with ctx.db.session() as s:
        out: dict[str, int] = {}
        for alloc in s.scalars(select(models.Allocation).where(models.Allocation.state == AllocationState.ASSIGNED)):
            for place in alloc.assignment:
                out[place["agent_id"]] = out.get(place["agent_id"], 0) + len(place["slot_ids"])
        return out


def change(ctx: MasterContext, agent_id: str, **values: object) -> None:
    ctx.controller.run(lambda s: s.execute(update(models.Agent).where(models.Agent.id == agent_id).values(**values)))


def test_the_next_pass_sees_a_new_a_disabled_a_draining_a_changed_and_a_removed_agent(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    ctl = ctx.controller
    connect(ctx, loop, "a1")
    submit(ctx, 2)
    ctl.tick()
    assert assigned(ctx) == {"a1": 1}  # one waits
    known = ctl.resources.known  # the agents' rows the resource manager (cluster/agent_resources.py) keeps
    reads = known.reads
    ctl.tick()
    assert known.reads == reads  # nothing changed: nothing read
    connect(ctx, loop, "a2", slots=2)  # new
    ctl.tick()
    assert assigned(ctx) == {"a1": 1, "a2": 1}
    change(ctx, "a2", enabled=False)  # a2 has a free slot, but is disabled
    connect(ctx, loop, "a3", slots=2)
    change(ctx, "a3", draining=True)
    submit(ctx)
    ctl.tick()
    assert assigned(ctx) == {"a1": 1, "a2": 1}
    change(ctx, "a2", enabled=True)
    ctl.tick()
    assert assigned(ctx) == {"a1": 1, "a2": 2}
    change(ctx, "a1", slots=[{"id": str(i), "type": "cuda"} for i in range(4)])  # its slots changed
    submit(ctx, 2)
    ctl.tick()
    assert assigned(ctx) == {"a1": 3, "a2": 2}  # a1 has one slot free still
    ctl.run(lambda s: s.execute(delete(models.Agent).where(models.Agent.id == "a1")))  # removed
    change(ctx, "a3", draining=False)
    submit(ctx, 3)
    ctl.tick()
    assert assigned(ctx) == {"a1": 3, "a2": 2, "a3": 2}


def test_the_snapshot_reads_the_agents_first_so_no_commit_falls_between_its_snapshot_and_their_version(
    fx: RecordingEffects, database: Database, loop: asyncio.AbstractEventLoop
) -> None:
    """Read after the transaction's snapshot was taken, the agents could be older than the version
    recorded with them: a registration committed in between would go unseen until the next change."""
    with database.session() as s:
        agent(s, "a1")
        experiment(fx, s)
    known = KnownAgents(database.changes)
    statements: list[str] = []
    engine = database.read_engine

    def seen(_conn, _cursor, statement, *_args) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", seen)
    try:
        snap = pass_snapshot.read(database, fx.config, hub_of(loop, "a1"), known)
    finally:
        event.remove(engine, "before_cursor_execute", seen)
    assert [a.id for a in snap.agents] == ["a1"]
    queries = [q for q in statements if q.lstrip().upper().startswith(("SELECT", "WITH"))]
    assert "FROM agents" in queries[0], queries[0]
