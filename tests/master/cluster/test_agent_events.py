"""What agents report, on a real database with recording effects: registration and reconciliation,
disconnection, spot interruption notices, task started / exited, and the periodic agent check
driven by a real AgentHub and a manual clock."""

from __future__ import annotations

import asyncio

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.master.cluster import agent_events
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.states import AgentState, AllocationState, InstanceState, TrialState
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    assign,
    experiment,
    run_on,
    trials_of,
)

A, G, T = AllocationState, AgentState, TrialState


def register(
    agent_id: str = "a1", *, slots: int = 1, running: list[str] | None = None, address: str = "", pool: str = "default"
) -> proto.Register:
    return proto.Register(
        agent_id=agent_id,
        hostname=f"host-{agent_id}",
        address=address,
        resource_pool=pool,
        slots=[proto.SlotInfo(id=str(i), type="cuda") for i in range(slots)],
        version="0.9",
        running_allocations=running or [],
    )


def trial_with_allocation(fx: RecordingEffects, s: Session, **kw) -> tuple[models.Trial, models.Allocation]:
    (trial,) = trials_of(s, experiment(fx, s, **kw))
    (alloc,) = allocations_of(s, trial)
    return trial, alloc


def agent_events_of(s: Session, agent_id: str) -> list[tuple[str | None, str, str]]:
    s.flush()
    return [
        (e.to_state, e.level, e.message)
        for e in s.scalars(
            select(models.Event)
            .where(models.Event.entity_type == "agent", models.Event.entity_id == agent_id)
            .order_by(models.Event.id)
        )
    ]


def instance(s: Session, instance_id: str, state: InstanceState) -> models.Instance:
    row = models.Instance(
        id=instance_id,
        resource_pool="default",
        provider="aws",
        instance_type="g4dn.xlarge",
        state=state,
        slots=1,
        launched_at=0.0,
    )
    s.add(row)
    s.flush()
    return row


# -- registered --------------------------------------------------------------------------------


def test_a_new_agent_is_recorded_connected(fx: RecordingEffects, s: Session) -> None:
    reply = agent_events.registered(fx, s, register("a1", slots=2), "10.0.0.5")
    assert reply == proto.Registered(
        agent_id="a1", heartbeat_interval=fx.config.agent_heartbeat_interval, kill_unknown=[]
    )
    row = s.get(models.Agent, "a1")
    assert (row.state, row.hostname, row.address, row.resource_pool, row.version) == (
        G.CONNECTED,
        "host-a1",
        "10.0.0.5",
        "default",
        "0.9",
    )  # no address given: where it connected from
    assert (row.registered_at, row.last_heartbeat, row.disconnected_at) == (fx.now, fx.now, None)
    assert [sl["id"] for sl in row.slots] == ["0", "1"] and row.slots[0]["type"] == "cuda"
    assert agent_events_of(s, "a1") == [
        (G.CONNECTED, "info", "registered from 10.0.0.5 with 2 slot(s) in pool default")
    ]


def test_a_reconnecting_agent_is_updated(fx: RecordingEffects, s: Session) -> None:
    agent_events.registered(fx, s, register("a1"), "10.0.0.5")
    agent_events.disconnected(fx, s, "a1", "connection closed")
    registered_at = fx.now
    fx.clock.advance(10)
    agent_events.registered(fx, s, register("a1", slots=4, address="192.168.1.9", pool="gpu"), "10.0.0.6")
    row = s.get(models.Agent, "a1")
    assert (row.state, row.address, row.resource_pool, len(row.slots)) == (G.CONNECTED, "192.168.1.9", "gpu", 4)
    assert (row.registered_at, row.last_heartbeat, row.disconnected_at) == (registered_at, fx.now, None)
    assert agent_events_of(s, "a1")[-1] == (G.CONNECTED, "info", "reconnected from 10.0.0.6")
    assert s.scalar(select(models.Agent.id).where(models.Agent.id != "a1")) is None


def test_registration_makes_a_starting_instance_running(fx: RecordingEffects, s: Session) -> None:
    starting = instance(s, "i-1", InstanceState.STARTING)
    terminating = instance(s, "i-2", InstanceState.TERMINATING)
    agent_events.registered(fx, s, register("i-1"), "10.0.0.5")
    assert fx.provisioner_wakes == 1  # new capacity of a dynamic pool: its provisioner looks at once
    agent_events.registered(fx, s, register("i-2"), "10.0.0.6")
    assert (starting.state, starting.registered_at) == (InstanceState.RUNNING, fx.now)
    assert (terminating.state, terminating.registered_at) == (InstanceState.TERMINATING, None)
    agent_events.registered(fx, s, register("static"), "10.0.0.7")
    assert fx.provisioner_wakes == 2  # a static agent is no instance: no provisioner to wake


def test_reconcile_returns_unknown_foreign_and_ended_allocations_to_kill(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    agent(s, "a2")
    _, mine = trial_with_allocation(fx, s)
    _, foreign = trial_with_allocation(fx, s)
    _, ended = trial_with_allocation(fx, s)
    run_on(fx, s, mine, "a1")
    run_on(fx, s, foreign, "a2")
    allocations.kill(fx, s, ended, "dropped while pending")
    fx.sent.clear()
    reply = agent_events.registered(fx, s, register("a1", running=[mine.id, foreign.id, ended.id, "9.9.1"]), "10.0.0.5")
    assert sorted(reply.kill_unknown) == sorted([foreign.id, ended.id, "9.9.1"])
    assert mine.state == A.RUNNING and foreign.state == A.RUNNING and fx.sent == []


def test_reconcile_repeats_the_kill_of_a_kill_requested_allocation(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"task_kill_grace_period": 4.0})
    agent(s, "a1")
    _, alloc = trial_with_allocation(fx, s)
    run_on(fx, s, alloc, "a1")
    allocations.kill(fx, s, alloc, "user asked")
    fx.sent.clear()
    reply = agent_events.registered(fx, s, register("a1", running=[alloc.id]), "10.0.0.5")
    assert reply.kill_unknown == []
    assert fx.sent == [
        ("a1", proto.KillTask(allocation_id=alloc.id, grace_period=4.0, reason="killed while the agent was away"))
    ]
    assert alloc.state == A.TERMINATING


def test_an_assigned_allocation_the_agent_never_started_is_queued_again_uncounted(
    fx: RecordingEffects, s: Session
) -> None:
    agent(s, "a1")
    trial, alloc = trial_with_allocation(fx, s, restarts=0)  # a counted failure would end the trial
    assign(fx, s, alloc, "a1")
    reply = agent_events.registered(fx, s, register("a1", running=[]), "10.0.0.5")
    assert reply.kill_unknown == []
    assert (alloc.state, alloc.exit_code, alloc.exit_reason) == (A.TERMINATED, None, allocations.NOT_STARTED)
    assert (trial.state, trial.restarts, trial.run_id) == (T.QUEUED, 0, 2)
    assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]
    assert fx.closed == [alloc.id]


def test_a_running_allocation_the_agent_no_longer_runs_ends_as_a_failure(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    trial, alloc = trial_with_allocation(fx, s, restarts=2)
    run_on(fx, s, alloc, "a1")
    assert trial.state == T.RUNNING
    agent_events.registered(fx, s, register("a1", running=[]), "10.0.0.5")
    assert (alloc.state, alloc.exit_code) == (A.TERMINATED, None)
    assert alloc.exit_reason == "the task was no longer running on agent a1 when it reconnected"
    assert (trial.state, trial.restarts) == (T.QUEUED, 1)
    assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]


def test_an_allocation_the_agent_still_runs_is_kept(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    trial, alloc = trial_with_allocation(fx, s)
    run_on(fx, s, alloc, "a1")
    fx.sent.clear()
    reply = agent_events.registered(fx, s, register("a1", running=[alloc.id]), "10.0.0.5")
    assert (reply.kill_unknown, fx.sent, alloc.state, trial.state) == ([], [], A.RUNNING, T.RUNNING)


# -- disconnected ------------------------------------------------------------------------------


def test_a_connected_agent_is_marked_disconnected(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    fx.clock.advance(7)
    agent_events.disconnected(fx, s, "a1", "connection closed")
    row = s.get(models.Agent, "a1")
    assert (row.state, row.disconnected_at) == (G.DISCONNECTED, fx.now)
    assert agent_events_of(s, "a1") == [(G.DISCONNECTED, "warning", "connection closed")]
    since = fx.now
    fx.clock.advance(5)
    agent_events.disconnected(fx, s, "a1", "closed twice")  # already away: it keeps the first time
    agent_events.disconnected(fx, s, "nobody", "never registered")
    assert row.disconnected_at == since and len(agent_events_of(s, "a1")) == 1
    assert s.get(models.Agent, "nobody") is None


# -- spot_interruption -------------------------------------------------------------------------


def test_a_spot_interruption_drains_the_agent_and_preempts_its_tasks(fx: RecordingEffects, s: Session) -> None:
    agent(s, "i-1", slots=2)
    inst = instance(s, "i-1", InstanceState.RUNNING)
    _, running = trial_with_allocation(fx, s)
    _, waiting = trial_with_allocation(fx, s, slots=4)
    run_on(fx, s, running, "i-1")
    fx.clock.advance(30)
    agent_events.spot_interruption(fx, s, "i-1", "terminate", "2026-01-01T00:02:00Z")
    assert s.get(models.Agent, "i-1").draining is True
    assert inst.interrupted_at == fx.now
    assert agent_events_of(s, "i-1")[-1] == (
        None,
        "warning",
        "spot interruption notice (terminate at 2026-01-01T00:02:00Z)",
    )
    assert (running.state, running.preempt_requested) == (A.RUNNING, True)
    assert fx.preempt_signals == {running.id}
    assert (waiting.state, waiting.preempt_requested) == (A.PENDING, False)
    first = inst.interrupted_at
    fx.clock.advance(30)
    agent_events.spot_interruption(fx, s, "i-1", "stop", "")
    assert inst.interrupted_at == first
    assert agent_events_of(s, "i-1")[-1][2] == "spot interruption notice (stop at soon)"


# -- task_started / task_exited ----------------------------------------------------------------


def test_task_started_makes_the_allocation_and_its_trial_running(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    trial, alloc = trial_with_allocation(fx, s)
    assign(fx, s, alloc, "a1")
    fx.clock.advance(12)
    agent_events.task_started(fx, s, "a1", alloc.id)
    assert (alloc.state, alloc.started_at, trial.state) == (A.RUNNING, fx.now, T.RUNNING)
    started = fx.now
    fx.clock.advance(5)
    agent_events.task_started(fx, s, "a1", alloc.id)  # a repeated report changes nothing
    agent_events.task_started(fx, s, "a1", "no.such.1")
    assert alloc.started_at == started


def test_task_started_of_a_pending_allocation_is_ignored(fx: RecordingEffects, s: Session) -> None:
    trial, alloc = trial_with_allocation(fx, s)
    agent_events.task_started(fx, s, "a1", alloc.id)
    assert (alloc.state, alloc.started_at, trial.state) == (A.PENDING, None, T.QUEUED)


def test_task_exited_ends_the_allocation_and_completes_the_trial(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    trial, alloc = trial_with_allocation(fx, s)
    run_on(fx, s, alloc, "a1")
    agent_events.task_exited(fx, s, "a1", alloc.id, 0, "")
    assert (alloc.state, alloc.exit_code, alloc.exit_reason) == (A.TERMINATED, 0, "exited with code 0")
    assert trial.state == T.COMPLETED and fx.closed == [alloc.id]


def test_a_task_leaving_a_draining_instance_wakes_the_provisioner(fx: RecordingEffects, s: Session) -> None:
    """A draining (or cordoned) instance ends once empty: its provisioner looks at once, not at its next tick."""
    for inst_id in ("i-drain", "i-plain"):
        instance(s, inst_id, InstanceState.RUNNING)
        agent(s, inst_id)
    s.get(models.Instance, "i-drain").draining_since = fx.now
    for inst_id in ("i-plain", "i-drain"):
        _, alloc = trial_with_allocation(fx, s)
        run_on(fx, s, alloc, inst_id)
        before = fx.provisioner_wakes
        agent_events.task_exited(fx, s, inst_id, alloc.id, 0, "")
        assert fx.provisioner_wakes - before == (1 if inst_id == "i-drain" else 0)


def test_task_exited_from_an_unknown_or_other_agent_is_ignored(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    agent(s, "a2")
    trial, alloc = trial_with_allocation(fx, s)
    run_on(fx, s, alloc, "a1")
    agent_events.task_exited(fx, s, "a2", alloc.id, 1, "not mine")
    agent_events.task_exited(fx, s, "a1", "no.such.1", 1, "unknown")
    assert (alloc.state, alloc.exit_code, trial.state, fx.closed) == (A.RUNNING, None, T.RUNNING, [])
    agent_events.task_exited(fx, s, "a1", alloc.id, 0, "")
    agent_events.task_exited(fx, s, "a1", alloc.id, 9, "reported again")  # already ended
    assert (alloc.exit_code, trial.state, fx.closed) == (0, T.COMPLETED, [alloc.id])


def test_a_distributed_allocation_ends_when_its_last_rank_exits(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    agent(s, "a2")
    trial, alloc = trial_with_allocation(fx, s, slots=2)
    run_on(fx, s, alloc, "a1", "a2")
    agent_events.task_exited(fx, s, "a1", alloc.id, 0, "")
    assert alloc.state == A.RUNNING and trial.state == T.RUNNING
    agent_events.task_exited(fx, s, "a2", alloc.id, 0, "")
    assert (alloc.state, alloc.exit_code, trial.state) == (A.TERMINATED, 0, T.COMPLETED)


# -- check_agents ------------------------------------------------------------------------------


def connect(
    fx: RecordingEffects, s: Session, hub: AgentHub, loop: asyncio.AbstractEventLoop, agent_id: str
) -> AgentConnection:
    """An agent connected as the agent WebSocket connects one: in the hub, then registered."""
    conn = AgentConnection(
        agent_id=agent_id, master_url="http://m:8080", remote_host="10.0.0.5", loop=loop, last_heartbeat=fx.now
    )
    hub.attach(conn)
    agent_events.registered(fx, s, register(agent_id), "10.0.0.5")
    return conn


def queued(loop: asyncio.AbstractEventLoop, conn: AgentConnection) -> list:
    """What the hub has handed the connection's writer so far."""
    loop.run_until_complete(asyncio.sleep(0))
    out = []
    while not conn.queue.empty():
        out.append(conn.queue.get_nowait())
    return out


def test_a_silent_agent_is_disconnected_then_lost_with_its_allocations(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    cfg = fx.config  # heartbeat timeout 15 s, reconnect wait 25 s
    hub = AgentHub()
    conn = connect(fx, s, hub, loop, "a1")
    trial, alloc = trial_with_allocation(fx, s, restarts=1)
    run_on(fx, s, alloc, "a1")
    row = s.get(models.Agent, "a1")

    fx.clock.advance(10)
    conn.last_heartbeat = fx.now
    fx.clock.advance(cfg.agent_heartbeat_timeout)
    agent_events.check_agents(fx, s, hub)  # exactly the timeout: still connected
    assert (row.state, row.last_heartbeat) == (G.CONNECTED, conn.last_heartbeat)
    assert queued(loop, conn) == []

    fx.clock.advance(1)
    agent_events.check_agents(fx, s, hub)
    assert (row.state, row.disconnected_at) == (G.DISCONNECTED, fx.now)
    assert agent_events_of(s, "a1")[-1] == (G.DISCONNECTED, "warning", "no heartbeat for 15s")
    assert queued(loop, conn) == [None]  # the hub closes the connection's writer
    assert alloc.state == A.RUNNING  # its tasks are kept while it may reconnect
    hub.detach(conn)  # as the WebSocket handler does when the connection ends

    fx.clock.advance(cfg.agent_reconnect_wait - 1)
    agent_events.check_agents(fx, s, hub)
    assert row.state == G.DISCONNECTED and alloc.state == A.RUNNING

    fx.clock.advance(1)
    agent_events.check_agents(fx, s, hub)
    assert row.state == G.GONE
    assert agent_events_of(s, "a1")[-1] == (G.GONE, "warning", "did not reconnect within 25s")
    assert (alloc.state, alloc.exit_code, alloc.exit_reason) == (A.TERMINATED, None, "agent a1 was lost")
    assert (trial.state, trial.restarts) == (T.QUEUED, 1)  # a failure, restarted
    assert [a.state for a in allocations_of(s, trial)] == [A.TERMINATED, A.PENDING]


def test_a_connected_agent_without_a_connection_is_disconnected_at_once(fx: RecordingEffects, s: Session) -> None:
    agent(s, "a1")
    agent_events.check_agents(fx, s, AgentHub())
    row = s.get(models.Agent, "a1")
    assert (row.state, row.disconnected_at) == (G.DISCONNECTED, fx.now)
    assert agent_events_of(s, "a1")[-1] == (G.DISCONNECTED, "warning", "connection lost")


def test_a_disconnected_agent_that_reconnected_in_the_hub_is_not_lost(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    hub = AgentHub()
    connect(fx, s, hub, loop, "a1")
    agent_events.disconnected(fx, s, "a1", "connection closed")
    fx.clock.advance(fx.config.agent_reconnect_wait + 1)
    agent_events.check_agents(fx, s, hub)
    assert s.get(models.Agent, "a1").state == G.DISCONNECTED


def test_a_reconnecting_agent_whose_rank_already_exited_leaves_the_other_ranks_running(
    fx: RecordingEffects, s: Session
) -> None:
    agent(s, "a1")
    agent(s, "a2")
    trial, alloc = trial_with_allocation(fx, s, slots=2, restarts=1)
    run_on(fx, s, alloc, "a1", "a2")
    agent_events.task_exited(fx, s, "a1", alloc.id, 0, "")  # rank 0 is done; rank 1 still runs
    agent_events.registered(fx, s, register("a1", running=[]), "10.0.0.5")  # a1 reconnects after a blip
    assert (alloc.state, trial.restarts) == (A.RUNNING, 0)


def test_losing_an_agent_whose_rank_already_exited_leaves_the_other_ranks_running(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    hub = AgentHub()
    connect(fx, s, hub, loop, "a1")
    a2 = connect(fx, s, hub, loop, "a2")
    trial, alloc = trial_with_allocation(fx, s, slots=2, restarts=1)
    run_on(fx, s, alloc, "a1", "a2")
    agent_events.task_exited(fx, s, "a1", alloc.id, 0, "")  # rank 0 is done; rank 1 still runs
    hub.detach(hub.get("a1"))
    agent_events.disconnected(fx, s, "a1", "connection closed")
    fx.clock.advance(fx.config.agent_reconnect_wait)
    a2.last_heartbeat = fx.now
    agent_events.check_agents(fx, s, hub)
    assert s.get(models.Agent, "a1").state == G.GONE
    assert (alloc.state, trial.restarts) == (A.RUNNING, 0)
