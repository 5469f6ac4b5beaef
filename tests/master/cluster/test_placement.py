"""The scheduling pass on a real database with recording effects: `plan` (which agents count, the
preemptions it asks for, provisioner wake-ups) and `apply` (token, ASSIGNED, StartTask, rendezvous
for a trial spread over several agents)."""

from __future__ import annotations

import asyncio
import json

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.config.master_config import ResourcePoolConfig, SchedulerConfig
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.cluster import placement
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.rendezvous import pick_port
from pedl.master.db import models
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.states import AgentState, AllocationState
from pedl.master.lifecycle.tokens import token_hash
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

A = AllocationState


def pending(fx: RecordingEffects, s: Session, **kw) -> models.Allocation:
    (trial,) = trials_of(s, experiment(fx, s, **kw))
    (alloc,) = allocations_of(s, trial)
    s.flush()
    return alloc


def starts(fx: RecordingEffects) -> list[tuple[str, proto.StartTask]]:
    return [(a, m) for a, m in fx.sent if isinstance(m, proto.StartTask)]


def provider_pool(**scheduler) -> ResourcePoolConfig:
    return ResourcePoolConfig(
        pool_name="default",
        scheduler=SchedulerConfig(**scheduler),
        provider=AWSProviderConfig(
            type="aws", image_id="ami-1", ssh_key_name="k", master_url="http://m:8080", instance_type="g4dn.xlarge"
        ),
    )


# -- plan --------------------------------------------------------------------------------------


def test_plan_places_a_pending_allocation_on_a_connected_agent(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1", slots=2)
    alloc = pending(fx, s)
    assert placement.plan(fx, s, hub_of(loop, "a1")) == [(alloc.id, [("a1", ["a1-0"])])]
    assert alloc.state == A.PENDING and fx.sent == []  # a plan only; apply assigns
    assert fx.provisioner_wakes == 0


def test_plan_counts_slots_held_by_placed_allocations_as_used(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1", slots=2)
    held = pending(fx, s, slots=2)
    run_on(fx, s, held, "a1")
    alloc = pending(fx, s)
    agent(s, "a2", slots=1)
    assert placement.plan(fx, s, hub_of(loop, "a1", "a2")) == [(alloc.id, [("a2", ["a2-0"])])]


@pytest.mark.parametrize("why", ["disabled", "draining", "not in the hub", "disconnected", "another pool"])
def test_plan_skips_agents_that_cannot_take_work(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop, why: str
) -> None:
    row = agent(s, "a1", pool="other" if why == "another pool" else "default")
    row.enabled = why != "disabled"
    row.draining = why == "draining"
    if why == "disconnected":
        row.state = AgentState.DISCONNECTED
    hub = AgentHub() if why == "not in the hub" else hub_of(loop, "a1")
    pending(fx, s)
    assert placement.plan(fx, s, hub) == []


def test_plan_without_pending_work_reads_nothing_else(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    fx.config = fx.config.model_copy(update={"resource_pools": [provider_pool()]})
    agent(s, "a1")
    assert placement.plan(fx, s, hub_of(loop, "a1")) == []
    assert fx.provisioner_wakes == 0


def test_plan_wakes_the_provisioners_when_a_provider_pool_cannot_place(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    fx.config = fx.config.model_copy(update={"resource_pools": [provider_pool()]})
    pending(fx, s)
    assert placement.plan(fx, s, AgentHub()) == []
    assert fx.provisioner_wakes == 1
    agent(s, "i-1")
    placement.plan(fx, s, hub_of(loop, "i-1"))  # placed: no more capacity wanted
    assert fx.provisioner_wakes == 1


def test_plan_does_not_wake_provisioners_for_a_static_pool(fx: RecordingEffects, s: Session) -> None:
    pending(fx, s)
    assert placement.plan(fx, s, AgentHub()) == []
    assert fx.provisioner_wakes == 0


def test_plan_preempts_a_less_urgent_allocation_when_the_pool_allows(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    pool = ResourcePoolConfig(pool_name="default", scheduler=SchedulerConfig(preemption=True))
    fx.config = fx.config.model_copy(update={"resource_pools": [pool]})
    agent(s, "a1")
    low = pending(fx, s, resources=", priority: 50")
    run_on(fx, s, low, "a1")
    urgent = pending(fx, s, resources=", priority: 10")
    assert placement.plan(fx, s, hub_of(loop, "a1")) == []
    assert (low.preempt_requested, fx.preempt_signals) == (True, {low.id})
    assert urgent.state == A.PENDING


# -- apply -------------------------------------------------------------------------------------


def test_apply_assigns_and_sends_start_task(fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop) -> None:
    agent(s, "a1", slots=2)
    alloc = pending(fx, s)
    hub = hub_of(loop, "a1")
    fx.clock.advance(4)
    placement.apply(fx, s, hub, placement.plan(fx, s, hub))
    assert (alloc.state, alloc.assigned_at, without_chief_port(alloc.assignment)) == (
        A.ASSIGNED,
        fx.now,
        [{"agent_id": "a1", "slot_ids": ["a1-0"]}],
    )
    ((agent_id, start),) = starts(fx)
    assert agent_id == "a1"
    assert (start.allocation_id, start.task_id, start.name, start.entrypoint, start.slot_ids) == (
        alloc.id,
        alloc.task_id,
        alloc.name,
        "python3 train.py",
        ["a1-0"],
    )
    assert start.context_url == f"http://m:8080/api/v1/tasks/{alloc.task_id}/context_directory"
    assert alloc.session_token_hash == token_hash(start.session_token) and len(start.session_token) >= 32
    env = start.env
    assert (env["DET_ALLOCATION_ID"], env["DET_TASK_ID"], env["DET_CLUSTER_ID"], env["DET_SESSION_TOKEN"]) == (
        alloc.id,
        alloc.task_id,
        "test-cluster",
        start.session_token,
    )
    assert (env["DET_TRIAL_ID"], env["DET_TRIAL_RUN_ID"]) == (str(alloc.trial_id), "1")
    assert "RANK" not in env and "MASTER_PORT" not in env  # one node: no rendezvous
    s.flush()
    event = s.scalar(
        select(models.Event).where(models.Event.entity_id == alloc.id, models.Event.to_state == A.ASSIGNED)
    )
    assert event.message == "assigned to a1['a1-0']"


def test_apply_skips_an_allocation_killed_since_the_plan(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1")
    alloc = pending(fx, s)
    hub = hub_of(loop, "a1")
    planned = placement.plan(fx, s, hub)
    assert planned
    allocations.kill(fx, s, alloc, "experiment killed")
    placement.apply(fx, s, hub, planned)
    assert (alloc.state, alloc.assignment, alloc.session_token_hash) == (A.TERMINATED, [], "")
    assert fx.sent == []


def test_a_distributed_trial_gets_a_rendezvous_port_on_the_chief_and_a_rank_each(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1").address = "10.0.0.1"
    agent(s, "a2").address = "10.0.0.2"
    alloc = pending(fx, s, slots=2)
    hub = hub_of(loop, "a1", "a2")
    planned = placement.plan(fx, s, hub)
    assert planned == [(alloc.id, [("a1", ["a1-0"]), ("a2", ["a2-0"])])]
    placement.apply(fx, s, hub, planned)
    port = pick_port(fx.config.port_range(), set(), seed=alloc.id)
    assert alloc.state == A.ASSIGNED
    assert alloc.assignment == [
        {"agent_id": "a1", "slot_ids": ["a1-0"], "port": port},
        {"agent_id": "a2", "slot_ids": ["a2-0"]},
    ]
    sent = starts(fx)
    assert [a for a, _ in sent] == ["a1", "a2"]
    assert [(m.env["RANK"], m.env["WORLD_SIZE"], m.env["MASTER_ADDR"], m.env["MASTER_PORT"]) for _, m in sent] == [
        ("0", "2", "10.0.0.1", str(port)),
        ("1", "2", "10.0.0.1", str(port)),
    ]
    assert [json.loads(m.env["PEDL_NODE_SLOTS"]) for _, m in sent] == [[1, 1], [1, 1]]
    assert len({m.session_token for _, m in sent}) == 1  # one allocation, one token
    assert sent[0][1].env["DET_ALLOCATION_ID"] == sent[1][1].env["DET_ALLOCATION_ID"] == alloc.id


def test_rendezvous_ports_held_on_a_chief_are_not_given_twice(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"rendezvous_port_range": "29400-29401"})
    agent(s, "a1", slots=4)
    agent(s, "a2", slots=4)
    first, second, third, fourth = (pending(fx, s, slots=2) for _ in range(4))
    hub = AgentHub()

    def spread(alloc: models.Allocation, chief: str, other: str, slot: int) -> list[placement.Placement]:
        return [(alloc.id, [(chief, [f"{chief}-{slot}"]), (other, [f"{other}-{slot}"])])]

    placement.apply(fx, s, hub, spread(first, "a1", "a2", 0))
    s.flush()  # each batch is its own transaction: a later one reads the ports held from the database
    placement.apply(fx, s, hub, spread(second, "a1", "a2", 1) + spread(third, "a2", "a1", 2))
    ports = {first.assignment[0]["port"], second.assignment[0]["port"]}
    assert ports == {29400, 29401}
    assert third.assignment[0]["port"] in ports  # another chief has its own ports
    s.flush()
    before = len(fx.sent)
    placement.apply(fx, s, hub, spread(fourth, "a1", "a2", 3))
    assert fourth.state == AllocationState.PENDING and fourth.assignment == []  # it waits for a port
    assert len(fx.sent) == before


def test_a_rendezvous_port_given_in_a_batch_is_taken_for_the_rest_of_it(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"rendezvous_port_range": "29400-29400"})
    agent(s, "a1", slots=2)
    agent(s, "a2", slots=2)
    first, second = (pending(fx, s, slots=2) for _ in range(2))
    chunk = [(first.id, [("a1", ["a1-0"]), ("a2", ["a2-0"])]), (second.id, [("a1", ["a1-1"]), ("a2", ["a2-1"])])]
    placement.apply(fx, s, AgentHub(), chunk)
    assert first.state == AllocationState.ASSIGNED and first.assignment[0]["port"] == 29400
    # the second waits for the port instead of failing the batch (and with it every later pass)
    assert second.state == AllocationState.PENDING and second.assignment == []


def test_a_batch_goes_on_past_an_allocation_that_waits_for_a_port(fx: RecordingEffects, s: Session) -> None:
    fx.config = fx.config.model_copy(update={"rendezvous_port_range": "29400-29400"})
    agent(s, "a1", slots=2)
    agent(s, "a2", slots=2)
    agent(s, "a3", slots=1)
    first, second = (pending(fx, s, slots=2) for _ in range(2))
    third = pending(fx, s, slots=1)
    chunk = [
        (first.id, [("a1", ["a1-0"]), ("a2", ["a2-0"])]),
        (second.id, [("a1", ["a1-1"]), ("a2", ["a2-1"])]),
        (third.id, [("a3", ["a3-0"])]),
    ]
    placement.apply(fx, s, AgentHub(), chunk)
    assert [a.state for a in (first, second, third)] == [
        AllocationState.ASSIGNED,
        AllocationState.PENDING,
        AllocationState.ASSIGNED,
    ]


# -- running tasks the decision reads -----------------------------------------------------------


def grid(fx: RecordingEffects, s: Session, resources: str = "") -> list[models.Allocation]:
    """An experiment of three one-slot trials (a grid); their pending allocations."""
    from pedl.master.experiments import service as experiments_service
    from tests.master.lifecycle.recording_effects import owner

    text = (
        "name: g\nentrypoint: python3 train.py\nsearcher: {name: grid, metric: loss, max_length: 10}\n"
        "hyperparameters: {lr: {type: categorical, vals: [1, 2, 3]}}\n" + resources
    )
    exp = experiments_service.create(fx, s, owner(s), config_text=text, files=[], activate=True)
    return [a for t in trials_of(s, exp) for a in allocations_of(s, t)]


def test_running_trials_count_against_their_experiments_max_slots(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    agent(s, "a1", slots=4)
    first, *rest = grid(fx, s, "resources: {max_slots: 1}\n")
    run_on(fx, s, first, "a1")
    free = pending(fx, s)
    assert [aid for aid, _ in placement.plan(fx, s, hub_of(loop, "a1"))] == [free.id]
    assert [a.wait_kind for a in rest] == ["max_slots", "max_slots"]


def test_fair_share_counts_what_each_experiment_runs(
    fx: RecordingEffects, s: Session, loop: asyncio.AbstractEventLoop
) -> None:
    pool = ResourcePoolConfig(pool_name="default", scheduler=SchedulerConfig(type="fair_share"))
    fx.config = fx.config.model_copy(update={"resource_pools": [pool]})
    agent(s, "a1", slots=3)
    busy, other, waiting = grid(fx, s)
    run_on(fx, s, busy, "a1")
    run_on(fx, s, other, "a1")
    newcomer = pending(fx, s)
    planned = placement.plan(fx, s, hub_of(loop, "a1"))
    assert [aid for aid, _ in planned] == [newcomer.id]  # before the experiment that runs two already
    assert waiting.state == A.PENDING
