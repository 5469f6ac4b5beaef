"""Why a queued allocation waits: the pure reasons, and the scheduling pass storing them."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.cluster import placement
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.cluster.wait_reasons import (
    PoolView,
    WaitKind,
    can_ever_fit,
    container_reason,
    max_slots_reason,
    reason,
    static_pool_warning,
)
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.experiments import service as experiments_service
from tests.master.lifecycle.recording_effects import (
    RecordingEffects,
    agent,
    allocations_of,
    experiment,
    owner,
    trials_of,
    without_chief_port,
)


@pytest.mark.parametrize(
    ("need", "agents", "fits"),
    [
        (2, [2], True),
        (3, [2], False),
        (3, [2, 2], False),
        (4, [2, 2], True),
        (3, [1, 2], True),
        (6, [4, 3, 3], True),
        (5, [4, 4], False),
        (0, [], False),
        (0, [1], True),
        (1, [], False),
    ],
)
def test_can_ever_fit_is_one_agent_or_whole_agents_adding_up(need: int, agents: list[int], fits: bool) -> None:
    assert can_ever_fit(need, agents) is fits


def static(agents: list[int], free: int | None = None) -> PoolView:
    return PoolView("default", agents, sum(agents) if free is None else free)


def test_a_static_pool_without_agents_says_so() -> None:
    why = reason(1, static([]), 0)
    assert (why.kind, why.text) == (WaitKind.NO_AGENTS, "no agent is connected in pool default")


def test_a_trial_no_agent_can_hold_says_how_large_it_is() -> None:
    why = reason(3, static([2]), 5)  # too large wins over the queue: waiting would never end
    assert why.kind == WaitKind.TOO_LARGE
    assert why.text == (
        "no agent in pool default is large enough: it needs 3 slots, the largest agent has 2 "
        "and whole agents cannot add up to 3"
    )


def test_behind_more_urgent_trials() -> None:
    why = reason(1, static([2], free=0), 3)
    assert (why.kind, why.text) == (WaitKind.BEHIND, "behind 3 trials of higher priority in pool default")
    assert reason(1, static([2], free=0), 1).text == "behind 1 trial of higher priority in pool default"


def test_waiting_for_free_slots() -> None:
    why = reason(2, static([2, 2], free=1), 0)
    assert (why.kind, why.text) == (WaitKind.NO_FREE_SLOTS, "needs 2 free slots in pool default (1 of 4 free)")


def dynamic(agents: list[int], *, live: int = 0, booting: int = 0, max_instances: int = 4) -> PoolView:
    return PoolView(
        "gpu", agents, 0, dynamic=True, max_instances=max_instances, live_instances=live, booting_instances=booting
    )


@pytest.mark.parametrize(
    ("pool", "kind", "text"),
    [
        (dynamic([], booting=2, live=2), WaitKind.BOOTING, "2 instances booting in pool gpu"),
        (
            dynamic([4, 4], live=2, max_instances=2),
            WaitKind.AT_MAX,
            "pool gpu is at max_instances (2); 4 slots must be freed first",
        ),
        (dynamic([4], live=1), WaitKind.LAUNCHING, "an instance is to be launched in pool gpu"),
        (dynamic([]), WaitKind.LAUNCHING, "an instance is to be launched in pool gpu"),
    ],
)
def test_dynamic_pool_reasons(pool: PoolView, kind: WaitKind, text: str) -> None:
    why = reason(4, pool, 0)
    assert (why.kind, why.text) == (kind, text)


def test_static_pool_warning_at_create() -> None:
    assert static_pool_warning(2, "default", [2, 1]) is None
    assert static_pool_warning(3, "default", [2]) == (
        "no agent in pool default can hold a trial of 3 slots (the largest has 2); "
        "the trials wait until a larger agent registers"
    )
    assert "has no agents yet" in static_pool_warning(1, "default", [])


# -- the scheduling pass stores them ---------------------------------------------------------------


@pytest.fixture
def hub_with(loop: asyncio.AbstractEventLoop):  # a factory
    def make(s: Session, *agents: tuple[str, int]) -> AgentHub:
        hub = AgentHub()
        for agent_id, slots in agents:
            agent(s, agent_id, slots=slots)
            hub.attach(AgentConnection(agent_id, "http://m", "127.0.0.1", loop, last_heartbeat=0.0))
        return hub

    return make


def trial_events(s: Session, trial: models.Trial) -> list[str]:
    return list(
        s.scalars(
            select(models.Event.message)
            .where(models.Event.entity_type == "trial", models.Event.entity_id == str(trial.id))
            .order_by(models.Event.id)
        )
    )


def test_the_pass_stores_the_reason_and_an_event_once(fx: RecordingEffects, database: Database, hub_with) -> None:
    with database.session() as s:
        hub = hub_with(s, ("a1", 2))
        exp = experiment(fx, s, slots=3)
        (trial,) = trials_of(s, exp)
        (alloc,) = allocations_of(s, trial)
        s.flush()
        assert placement.plan(fx, s, hub) == []
        assert alloc.wait_kind == WaitKind.TOO_LARGE and "needs 3 slots" in alloc.wait_reason
        placement.plan(fx, s, hub)  # the same reason again: no second event
        waiting = [m for m in trial_events(s, trial) if m.startswith("waiting: ")]
        assert waiting == [f"waiting: {alloc.wait_reason}"]


def test_an_assignment_clears_the_reason(fx: RecordingEffects, database: Database, hub_with) -> None:
    with database.session() as s:
        hub = hub_with(s, ("a1", 1))
        first, second = (allocations_of(s, trials_of(s, experiment(fx, s))[0])[0] for _ in range(2))
        s.flush()
        plan = placement.plan(fx, s, hub)
        assert [aid for aid, _ in plan] == [first.id]
        assert second.wait_kind == WaitKind.NO_FREE_SLOTS
        placement.apply(fx, s, hub, plan)
        assert first.wait_reason is None and first.wait_kind is None


def test_a_less_urgent_trial_is_told_it_is_behind(fx: RecordingEffects, database: Database, hub_with) -> None:
    with database.session() as s:
        hub = hub_with(s, ("a1", 1))
        running = allocations_of(s, trials_of(s, experiment(fx, s))[0])[0]
        s.flush()
        placement.apply(fx, s, hub, placement.plan(fx, s, hub))
        assert without_chief_port(running.assignment) == [{"agent_id": "a1", "slot_ids": ["a1-0"]}]
        urgent = allocations_of(s, trials_of(s, experiment(fx, s, resources=", priority: 1"))[0])[0]
        relaxed = allocations_of(s, trials_of(s, experiment(fx, s, resources=", priority: 60"))[0])[0]
        s.flush()
        placement.plan(fx, s, hub)
        assert urgent.wait_kind == WaitKind.NO_FREE_SLOTS
        assert (relaxed.wait_kind, relaxed.wait_reason) == (
            WaitKind.BEHIND,
            "behind 1 trial of higher priority in pool default",
        )


# -- a pool without container agents, and an experiment's max_slots ------------------------------------


def test_the_wait_reason_names_the_pool_without_container_agents() -> None:
    pool = PoolView("gpu", [4, 4], 8, container_agents=0)
    why = container_reason(pool)
    assert why is not None and why.kind == WaitKind.NEEDS_CONTAINERS
    assert "none of the 2 agents of pool gpu runs containers" in why.text
    assert container_reason(PoolView("gpu", [4], 4, container_agents=1)) is None
    assert container_reason(PoolView("gpu", [], 0)) is None  # no agents at all: the usual reason says so
    assert container_reason(PoolView("dyn", [4], 4, dynamic=True)) is None


def test_the_reason_names_max_slots() -> None:
    why = max_slots_reason(1, 2, 2)
    assert why.kind == WaitKind.MAX_SLOTS
    assert why.text == "waiting on the experiment's max_slots: its trials hold 2 of 2 slot(s), the trial needs 1"
    never = max_slots_reason(4, 2, 0)
    assert never.text.startswith("the experiment's max_slots (2) is less than the trial's 4 slots")


def test_the_pass_places_up_to_max_slots_and_stores_the_reason(
    fx: RecordingEffects, database: Database, loop: asyncio.AbstractEventLoop
) -> None:
    hub = AgentHub()
    hub.attach(AgentConnection("a1", "http://m", "127.0.0.1", loop, last_heartbeat=0.0))
    with database.session() as s:
        agent(s, "a1", slots=4)
        capped = _grid(fx, s, max_slots=1)
        free = _grid(fx, s, max_slots=None)
        s.flush()
        planned = placement.plan(fx, s, hub)
        by_exp = {e.id: [a for t in trials_of(s, e) for a in allocations_of(s, t)] for e in (capped, free)}
        placed_ids = {aid for aid, _ in planned}
        assert len(placed_ids & {a.id for a in by_exp[capped.id]}) == 1
        assert {a.id for a in by_exp[free.id]} <= placed_ids  # the other experiment takes the room
        waiting = [a for a in by_exp[capped.id] if a.id not in placed_ids]
        assert len(waiting) == 2 and all(a.wait_kind == WaitKind.MAX_SLOTS for a in waiting)
        assert "max_slots" in waiting[0].wait_reason


def _grid(fx: RecordingEffects, s: Session, *, max_slots: int | None):
    text = (
        "name: capped\nentrypoint: python3 train.py\n"
        "searcher: {name: grid, metric: loss, max_length: 10}\n"
        "hyperparameters: {lr: {type: categorical, vals: [1, 2, 3]}}\n"
        + (f"resources: {{max_slots: {max_slots}}}\n" if max_slots is not None else "")
    )
    return experiments_service.create(fx, s, owner(s), config_text=text, files=[], activate=True)
