"""Agents as the API lists them (which allocation holds each slot, whether the agent is connected
now) and the task logs an agent streams in."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.common.agent_protocol import LogLine
from pedl.config.master_config import MasterConfig
from pedl.master.agents import service as agents_service
from pedl.master.cluster.agent_hub import AgentConnection
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle.states import AllocationState
from pedl.master.wiring import build_context
from tests.master.lifecycle.recording_effects import agent

A = AllocationState


@pytest.fixture
def ctx(master_config: MasterConfig, database: Database) -> MasterContext:
    return build_context(master_config, database, ManualClock(5_000.0), cluster_id="c-1")


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    lp = asyncio.new_event_loop()
    yield lp
    lp.close()


def allocation(alloc_id: str, state: AllocationState, places: list[tuple[str, list[str]]]) -> models.Allocation:
    return models.Allocation(
        id=alloc_id,
        task_id=alloc_id,
        trial_id=None,
        name=alloc_id,
        state=state,
        resource_pool="default",
        slots_needed=sum(len(p[1]) for p in places),
        priority=42,
        assignment=[{"agent_id": a, "slot_ids": slots} for a, slots in places],
        session_token_hash="",
        owner_id=1,
        queued_at=4_000.0,
    )


def test_listing_shows_the_allocation_holding_each_slot_and_who_is_connected(
    ctx: MasterContext, loop: asyncio.AbstractEventLoop
) -> None:
    with ctx.db.session() as s:
        agent(s, "b2", slots=1)
        agent(s, "a1", slots=3)
        s.add_all(
            [
                allocation("run", A.RUNNING, [("a1", ["a1-0"])]),
                allocation("stopping", A.TERMINATING, [("b2", ["b2-0"])]),
                allocation("starting", A.ASSIGNED, [("a1", ["a1-2"])]),
                allocation("ended", A.TERMINATED, [("a1", ["a1-1"])]),  # holds nothing any more
                allocation("waiting", A.PENDING, []),
            ]
        )
    ctx.hub.attach(AgentConnection(agent_id="a1", master_url="http://m", remote_host="127.0.0.1", loop=loop))
    rows = agents_service.listing(ctx)
    held = [(a.id, {sid: sl.container.id for sid, sl in a.slots.items() if sl.container}, a.connected) for a in rows]
    assert held == [
        ("a1", {"a1-0": "run", "a1-2": "starting"}, True),
        ("b2", {"b2-0": "stopping"}, False),
    ]
    assert [len(a.slots) for a in rows] == [3, 1]


def test_listing_with_no_agents_is_empty(ctx: MasterContext) -> None:
    assert agents_service.listing(ctx) == []


def test_store_logs_keeps_lines_of_a_known_allocation_and_drops_the_rest(ctx: MasterContext) -> None:
    with ctx.db.session() as s:
        agent(s, "a1")
        s.add(allocation("1.1.1", A.RUNNING, [("a1", ["a1-0"])]))
    lines = [
        LogLine(timestamp=5_001.0, stdtype="stdout", message="step 1"),
        LogLine(timestamp=5_002.0, stdtype="stderr", message="warning: slow\n"),
    ]
    agents_service.store_logs(ctx, "a1", "1.1.1", lines)
    agents_service.store_logs(ctx, "a1", "no-such-allocation", [LogLine(timestamp=5_003.0, message="lost")])
    with ctx.db.session() as s:
        logs = s.scalars(select(models.TaskLog).order_by(models.TaskLog.id)).all()
        assert [(r.allocation_id, r.agent_id, r.timestamp, r.level, r.source, r.message) for r in logs] == [
            ("1.1.1", "a1", 5_001.0, "LOG_LEVEL_INFO", "task", "step 1\n"),
            ("1.1.1", "a1", 5_002.0, "LOG_LEVEL_ERROR", "task", "warning: slow\n"),
        ]
