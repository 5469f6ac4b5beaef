"""The Controller, the lock-and-loop shell, built as the master builds it (master/wiring.py): messages
and revocations leave only with a commit, start-up after a restart, the whole periodic pass with an
agent connected through a real AgentHub, and the effects it implements."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Iterator

import pytest
from sqlalchemy import select, update

from pedl.clock import ManualClock
from pedl.common import agent_protocol as proto
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import Caller
from pedl.master.cluster import agent_events, placement
from pedl.master.cluster import controller as controller_module
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.cluster.controller import Controller
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import AgentState, AllocationState, ExperimentState, TrialState
from pedl.master.wiring import attach_checkpoint_gc, build_context
from tests.master.lifecycle.recording_effects import (
    agent,
    allocations_of,
    experiment,
    owner,
    run_on,
    trials_of,
    without_chief_port,
)

A, G = AllocationState, AgentState


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(1_000_000.0)


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database, clock: ManualClock) -> MasterContext:
    return build_context(master_config, database, clock, cluster_id="c1")


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def attach(ctx: MasterContext, loop: asyncio.AbstractEventLoop, agent_id: str) -> AgentConnection:
    conn = AgentConnection(
        agent_id=agent_id, master_url="http://m:8080", remote_host="10.0.0.5", loop=loop, last_heartbeat=ctx.clock.now()
    )
    ctx.hub.attach(conn)
    return conn


def connect(ctx: MasterContext, loop: asyncio.AbstractEventLoop, agent_id: str) -> AgentConnection:
    """An agent connected as the agent WebSocket connects one: in the hub, then registered."""
    conn = attach(ctx, loop, agent_id)
    ctx.controller.agent_registered(
        proto.Register(
            agent_id=agent_id, hostname=agent_id, address="10.0.0.5", slots=[proto.SlotInfo(id="0", type="cuda")]
        ),
        "10.0.0.5",
    )
    return conn


def delivered(loop: asyncio.AbstractEventLoop, conn: AgentConnection) -> list:
    """What the hub has handed the connection's writer so far (the loop runs once to deliver it)."""
    loop.run_until_complete(asyncio.sleep(0))
    out = []
    while not conn.queue.empty():
        out.append(conn.queue.get_nowait())
    return out


def submit(ctx: MasterContext) -> int:
    ctl = ctx.controller
    return ctl.run(lambda s: experiment(ctl, s).id)  # type: ignore[return-value]


def task_caller(ctx: MasterContext, allocation_id: str) -> Caller:
    with ctx.db.session() as s:
        return Caller(owner(s), allocation_id=allocation_id)


# -- run ---------------------------------------------------------------------------------------


def test_run_delivers_messages_after_the_transaction(ctx: MasterContext, loop: asyncio.AbstractEventLoop) -> None:
    conn = attach(ctx, loop, "a1")
    ctl = ctx.controller
    kill = proto.KillTask(allocation_id="1.1.1", reason="stop", grace_period=2.0)
    during = []

    def fn(s) -> str:
        agent(s, "a1")
        ctl.send("a1", kill)
        ctl.send("a2", kill)  # not connected: dropped after the commit, not an error
        during.extend(delivered(loop, conn))
        return "result"

    assert ctl.run(fn) == "result"
    assert during == []
    assert delivered(loop, conn) == [proto.dump(kill)]
    with ctx.db.session() as s:
        assert s.get(models.Agent, "a1").state == G.CONNECTED
    ctl.run(lambda s: None)
    assert delivered(loop, conn) == []  # delivered once


def test_run_drops_messages_and_revocations_when_fn_raises(ctx: MasterContext, loop: asyncio.AbstractEventLoop) -> None:
    conn = attach(ctx, loop, "a1")
    ctl = ctx.controller

    def fn(s) -> None:
        agent(s, "a1")
        ctl.send("a1", proto.KillTask(allocation_id="1.1.1"))
        ctl.allocation_closed("1.1.1")
        raise ValueError("boom")

    with pytest.raises(ValueError, match="boom"):
        ctl.run(fn)
    token_cached_since = task_caller(ctx, "1.1.1")
    ctx.caller_cache.put("task-token", token_cached_since, ctx.clock.now())
    ctl.run(lambda s: None)  # the next transaction carries nothing over from the failed one
    assert delivered(loop, conn) == []
    assert ctx.caller_cache.get("task-token", ctx.clock.now()) is token_cached_since
    with ctx.db.session() as s:
        assert s.get(models.Agent, "a1") is None


def test_a_preemption_signal_raised_in_a_failed_transaction_is_dropped(ctx: MasterContext) -> None:
    ctl = ctx.controller

    def fn(s) -> None:
        ctl.signal_preemption("1.1.1")
        raise ValueError("boom")

    with pytest.raises(ValueError):
        ctl.run(fn)
    assert ctl.should_preempt("1.1.1") is False


def test_allocation_closed_drops_its_cached_callers_and_its_preemption_signal(ctx: MasterContext) -> None:
    ctl, cache, now = ctx.controller, ctx.caller_cache, ctx.clock.now()
    cache.put("closing", task_caller(ctx, "1.1.1"), now)
    cache.put("other", task_caller(ctx, "1.2.1"), now)
    ctl.signal_preemption("1.1.1")
    ctl.allocation_closed("1.1.1")
    assert cache.get("closing", now) is None and cache.get("other", now) is not None
    assert ctl.should_preempt("1.1.1") is False

    other = task_caller(ctx, "1.2.1")

    def fn(s) -> None:
        ctl.allocation_closed("1.2.1")
        cache.put("other", other, now)  # a lookup during the transaction cached it again

    ctl.run(fn)
    assert cache.get("other", now) is None  # dropped once more after the commit


# -- startup -----------------------------------------------------------------------------------


def test_startup_waits_for_agents_to_reconnect_and_reloads_preemptions(
    ctx: MasterContext, master_config: MasterConfig, database: Database, clock: ManualClock
) -> None:
    ctl = ctx.controller
    ids: dict[str, str] = {}

    def before_the_restart(s) -> None:
        agent(s, "a1", slots=3, now=clock.now())
        agent(s, "a2", now=clock.now())
        agent_events.disconnected(ctl, s, "a2", "connection closed")
        preempted, running, ended = (allocations_of(s, trials_of(s, experiment(ctl, s))[0])[0] for _ in range(3))
        for alloc in (preempted, running, ended):
            run_on(ctl, s, alloc, "a1")
        allocations.preempt(ctl, s, preempted, "a more urgent trial")
        allocations.preempt(ctl, s, ended, "a more urgent trial")
        allocations.terminate(ctl, s, ended, 0, "")
        ids.update(preempted=preempted.id, running=running.id, ended=ended.id)

    ctl.run(before_the_restart)
    away_since = clock.now()
    clock.advance(100)
    restarted = build_context(master_config, database, clock, cluster_id="c1").controller
    assert restarted.should_preempt(ids["preempted"]) is False
    restarted.startup()
    assert restarted.should_preempt(ids["preempted"]) is True
    assert restarted.should_preempt(ids["running"]) is False and restarted.should_preempt(ids["ended"]) is False
    with database.session() as s:
        a1, a2 = s.get(models.Agent, "a1"), s.get(models.Agent, "a2")
        assert (a1.state, a1.disconnected_at) == (G.DISCONNECTED, clock.now())
        assert (a2.state, a2.disconnected_at) == (G.DISCONNECTED, away_since)
        last = s.scalars(select(models.Event).where(models.Event.entity_id == "a1").order_by(models.Event.id)).all()[-1]
        assert (last.to_state, last.message) == (G.DISCONNECTED, "master restarted; waiting for the agent to reconnect")
        assert s.get(models.Allocation, ids["preempted"]).state == A.RUNNING  # kept while the agent may come back


# -- the periodic pass -------------------------------------------------------------------------


def test_tick_starts_a_pending_trial_on_an_agent_connected_through_the_hub(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    conn = connect(ctx, loop, "a1")
    exp_id = submit(ctx)
    assert delivered(loop, conn) == []
    ctx.controller.tick()
    (msg,) = delivered(loop, conn)
    with ctx.db.session() as s:
        (trial,) = trials_of(s, s.get(models.Experiment, exp_id))
        (alloc,) = allocations_of(s, trial)
    start = proto.MASTER_MESSAGE.validate_python(msg)
    assert isinstance(start, proto.StartTask)
    assert (start.allocation_id, start.slot_ids, start.env["DET_CLUSTER_ID"]) == (alloc.id, ["0"], "c1")
    assert start.context_url == f"http://m:8080/api/v1/tasks/{alloc.task_id}/context_directory"
    assert (alloc.state, without_chief_port(alloc.assignment)) == (A.ASSIGNED, [{"agent_id": "a1", "slot_ids": ["0"]}])
    ctx.controller.tick()
    assert delivered(loop, conn) == []  # placed once


def test_tick_creates_trials_for_room_that_came_and_places_them(
    master_config: MasterConfig, database: Database, clock: ManualClock, loop: asyncio.AbstractEventLoop
) -> None:
    limits = master_config.limits.model_copy(update={"min_live_trials_per_experiment": 1})
    ctx = build_context(master_config.model_copy(update={"limits": limits}), database, clock, cluster_id="c1")
    ctl = ctx.controller
    exp_id = ctl.run(lambda s: experiment(ctl, s, searcher="random", extra=", max_trials: 2").id)
    with ctx.db.session() as s:
        assert len(trials_of(s, s.get(models.Experiment, exp_id))) == 1  # an empty pool has room for one
    conns = [connect(ctx, loop, agent_id) for agent_id in ("a1", "a2")]
    ctl.tick()
    with ctx.db.session() as s:
        trials = trials_of(s, s.get(models.Experiment, exp_id))
        allocs = {a.id: a for t in trials for a in allocations_of(s, t)}
    assert len(trials) == 2 and {a.state for a in allocs.values()} == {A.ASSIGNED}
    started = {}
    for conn in conns:
        (msg,) = delivered(loop, conn)
        started[msg["allocation_id"]] = conn.agent_id
    assert started == {alloc_id: a.assignment[0]["agent_id"] for alloc_id, a in allocs.items()}
    assert sorted(started.values()) == ["a1", "a2"]


def test_agent_reports_wake_the_scheduler_and_the_provisioners(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    ctl, wakes = ctx.controller, []
    ctl.set_waker(lambda: wakes.append("scheduler"))
    ctl.set_provisioner_waker(lambda: wakes.append("provisioners"))
    connect(ctx, loop, "a1")
    assert wakes == ["scheduler"]
    submit(ctx)  # a new allocation wants placing
    assert wakes == ["scheduler"] * 2
    ctl.spot_interruption("a1", "terminate", "")
    assert wakes[-1] == "provisioners"
    ctl.task_exited("a1", "no.such.1", 0, "")
    assert wakes[-1] == "scheduler" and len(wakes) == 4


# -- the effects and the wiring ----------------------------------------------------------------


def test_the_controller_implements_the_effects_protocol(ctx: MasterContext, clock: ManualClock) -> None:
    members = {name: value for name, value in vars(ClusterEffects).items() if not name.startswith("_")}
    assert set(members) == {
        "now",
        "config",
        "cluster_id",
        "send",
        "wake",
        "wake_provisioners",
        "want_checkpoint_gc",
        "signal_preemption",
        "allocation_closed",
    }
    for name, declared in members.items():
        implemented = inspect.getattr_static(Controller, name)
        assert isinstance(implemented, property) == isinstance(declared, property), name
        if not isinstance(declared, property):
            assert list(inspect.signature(implemented).parameters) == list(inspect.signature(declared).parameters)
    effects: ClusterEffects = ctx.controller
    clock.advance(42)
    assert (effects.now, effects.config, effects.cluster_id) == (clock.now(), ctx.config, "c1")


def test_build_context_shares_one_hub_clock_and_caller_cache(
    master_config: MasterConfig, database: Database, clock: ManualClock
) -> None:
    ctx = build_context(master_config, database, clock, master_id="m1", agent_token="secret")
    ctl = ctx.controller
    assert ctl.hub is ctx.hub and ctl.caller_cache is ctx.caller_cache
    assert ctl.clock is ctx.clock is clock and ctl.db is ctx.db is database and ctl.config is ctx.config
    assert (ctx.master_id, ctx.agent_token, ctx.provisioners) == ("m1", "secret", {})
    assert ctx.cluster_id and ctl.cluster_id == ctx.cluster_id  # made on the first start
    again = build_context(master_config, database, clock)
    assert again.cluster_id == ctx.cluster_id and again.hub is not ctx.hub  # kept in the database


def test_checkpoint_gc_requests_reach_the_attached_collector(
    ctx: MasterContext, clock: ManualClock, loop: asyncio.AbstractEventLoop
) -> None:
    ctl = ctx.controller
    ctl.want_checkpoint_gc(99)  # nothing attached yet: dropped
    gc = attach_checkpoint_gc(ctx)
    assert gc.pending() == {}
    connect(ctx, loop, "a1")
    exp_id = submit(ctx)
    ctl.tick()
    with ctx.db.session() as s:
        (trial,) = trials_of(s, s.get(models.Experiment, exp_id))
        (alloc,) = allocations_of(s, trial)
    clock.advance(30)
    ctl.task_started("a1", alloc.id)
    ctx.task_contact.note(ctx.db, alloc.id, clock.now())  # the trial called the master, as real ones do
    ctl.task_exited("a1", alloc.id, 0, "")  # the trial completes, and with it the experiment
    assert gc.pending() == {exp_id: clock.now()}
    with ctx.db.session() as s:
        assert s.get(models.Experiment, exp_id).state == ExperimentState.COMPLETED
        assert s.get(models.Trial, trial.id).state == TrialState.COMPLETED


# -- the pass: planned outside the lock, written in batches ---------------------------------------


def connect_agents(ctx: MasterContext, loop: asyncio.AbstractEventLoop, n: int) -> dict[str, AgentConnection]:
    return {f"a{i}": connect(ctx, loop, f"a{i}") for i in range(n)}


def test_a_pass_larger_than_a_batch_assigns_each_placement_once_in_several_transactions(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(controller_module, "SCHEDULE_BATCH", 2)
    conns = connect_agents(ctx, loop, 5)
    for _ in range(6):
        submit(ctx)  # one trial each; one of the six finds no slot
    ctl = ctx.controller
    transactions = []
    run = ctl.run
    monkeypatch.setattr(ctl, "run", lambda fn: transactions.append(fn) or run(fn))
    ctl.tick()
    assert len(transactions) >= 2 + 3  # check_agents, top_up, then three batches of placements at least
    with ctx.db.session() as s:
        allocs = s.scalars(select(models.Allocation)).all()
        assigned = [a for a in allocs if a.state == A.ASSIGNED]
        assert len(assigned) == 5 and [a.state for a in allocs].count(A.PENDING) == 1
        slots = [(p["agent_id"], slot) for a in assigned for p in a.assignment for slot in p["slot_ids"]]
        assert sorted(slots) == [(f"a{i}", "0") for i in range(5)]  # every slot once
        assert len({a.session_token_hash for a in assigned}) == 5
        events = s.scalars(select(models.Event.entity_id).where(models.Event.to_state == A.ASSIGNED)).all()
        assert sorted(events) == sorted(a.id for a in assigned)
    for conn in conns.values():
        (msg,) = delivered(loop, conn)
        assert msg["type"] == "start_task" and msg["allocation_id"] in {a.id for a in assigned}


def test_the_pass_plans_without_the_cluster_lock_or_the_database_write_lock(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    connect(ctx, loop, "a1")
    submit(ctx)
    ctl = ctx.controller
    waited: list[bool] = []

    def others_go_on() -> None:
        ctl.run(lambda s: None)  # a request that takes the cluster lock
        with ctx.db.session() as s:  # one that writes (SQLite: BEGIN IMMEDIATE)
            s.execute(update(models.Agent).where(models.Agent.id == "nobody").values(hostname="x"))

    decide = placement.decide

    def deciding(*args, **kw):
        other = threading.Thread(target=others_go_on, daemon=True)
        other.start()
        other.join(timeout=10)
        waited.append(other.is_alive())
        return decide(*args, **kw)

    monkeypatch.setattr(placement, "decide", deciding)
    ctl.tick()
    assert waited == [False]
    with ctx.db.session() as s:
        assert [a.state for a in s.scalars(select(models.Allocation))] == [A.ASSIGNED]


def test_what_changed_between_the_plan_and_its_batch_counts(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    conns = connect_agents(ctx, loop, 3)
    for _ in range(3):
        submit(ctx)
    ctl = ctx.controller
    decide = placement.decide
    on: dict[str, str] = {}

    def decide_then_change(*args, **kw):
        decided = decide(*args, **kw)
        on.update({places[0][0]: aid for aid, places in decided.placements})
        ctl.run(lambda s: allocations.kill(ctl, s, s.get(models.Allocation, on["a0"]), "killed by its user"))
        ctl.agent_disconnected("a1", "connection closed")
        return decided

    monkeypatch.setattr(placement, "decide", decide_then_change)
    ctl.tick()
    with ctx.db.session() as s:
        got = {aid: s.get(models.Allocation, aid).state for aid in on.values()}
    assert got == {on["a0"]: A.TERMINATED, on["a1"]: A.PENDING, on["a2"]: A.ASSIGNED}
    assert [m["allocation_id"] for m in delivered(loop, conns["a2"])] == [on["a2"]]
    assert delivered(loop, conns["a0"]) == delivered(loop, conns["a1"]) == []


def test_an_agent_disabled_after_its_batch_was_prepared_is_not_assigned_to(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(controller_module, "SCHEDULE_BATCH", 1)
    conns = connect_agents(ctx, loop, 2)
    for _ in range(2):
        submit(ctx)
    ctl = ctx.controller
    prepare = ctl._prepare

    def prepare_then_disable(decided, chunk, cache):
        ready = prepare(decided, chunk, cache)
        ctl.run(lambda s: s.execute(update(models.Agent).where(models.Agent.id == "a1").values(enabled=False)))
        return ready

    monkeypatch.setattr(ctl, "_prepare", prepare_then_disable)
    ctl.tick()
    with ctx.db.session() as s:
        allocs = s.scalars(select(models.Allocation)).all()
    assert sorted(a.state for a in allocs) == [A.ASSIGNED, A.PENDING]
    assert [p["agent_id"] for a in allocs for p in a.assignment] == ["a0"]
    assert delivered(loop, conns["a1"]) == [] and len(delivered(loop, conns["a0"])) == 1


def test_batches_shrink_where_writing_one_holds_the_lock_long_and_grow_back() -> None:
    full, target = controller_module.SCHEDULE_BATCH, controller_module.BATCH_LOCK_TARGET
    assert controller_module._next_batch(full, target / 2) == full  # never past SCHEDULE_BATCH
    assert controller_module._next_batch(full, target * 2) == full // 2
    assert controller_module._next_batch(full, target * 100) == full // 10  # a tenth at least
    assert controller_module._next_batch(full // 10, target / 4) == full // 10 * 4
    assert controller_module._next_batch(full, 0.0) == full
