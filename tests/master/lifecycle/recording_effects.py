"""A ClusterEffects (master/lifecycle/effects.py) that records what the operations asked for, so that
the cluster's modules can be tested on a real database without a Controller, a hub or an event loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.cluster import agent_events, placement
from pedl.master.cluster.agent_hub import AgentConnection, AgentHub
from pedl.master.db import models
from pedl.master.experiments import service as experiments_service
from pedl.master.identity import users as users_service
from pedl.master.lifecycle import allocations
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import AgentState


@dataclass
class RecordingEffects:
    config: MasterConfig
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_000_000.0))
    cluster_id: str = "test-cluster"
    sent: list[tuple[str, BaseModel]] = field(default_factory=list)
    wakes: int = 0
    provisioner_wakes: int = 0
    gc_wanted: list[int] = field(default_factory=list)
    preempt_signals: set[str] = field(default_factory=set)
    closed: list[str] = field(default_factory=list)

    @property
    def now(self) -> float:
        return self.clock.now()

    def send(self, agent_id: str, msg: BaseModel) -> None:
        self.sent.append((agent_id, msg))

    def wake(self) -> None:
        self.wakes += 1

    def wake_provisioners(self) -> None:
        self.provisioner_wakes += 1

    def want_checkpoint_gc(self, experiment_id: int) -> None:
        self.gc_wanted.append(experiment_id)

    def signal_preemption(self, allocation_id: str) -> None:
        self.preempt_signals.add(allocation_id)

    def allocation_closed(self, allocation_id: str) -> None:
        self.preempt_signals.discard(allocation_id)
        self.closed.append(allocation_id)

    def sent_types(self, agent_id: str | None = None) -> list[str]:
        return [m.type for a, m in self.sent if agent_id is None or a == agent_id]


def _check_protocol(fx: RecordingEffects) -> ClusterEffects:
    return fx  # a type checker fails here if RecordingEffects stops implementing the protocol


CONFIG = """\
name: unit
entrypoint: python3 train.py
searcher: {name: %(searcher)s, metric: loss, max_length: 10%(extra)s}
resources: {slots_per_trial: %(slots)d%(resources)s}
max_restarts: %(restarts)d
"""


def owner(s: Session) -> models.User:
    users_service.ensure_default_users(s, 0.0)
    return s.scalar(select(models.User).where(models.User.username == "determined"))


def experiment(
    fx: ClusterEffects,
    s: Session,
    *,
    slots: int = 1,
    restarts: int = 0,
    searcher: str = "single",
    extra: str = "",
    resources: str = "",
    activate: bool = True,
) -> models.Experiment:
    """An experiment created the way the API creates one (its searcher makes its first trials).
    `extra` goes into the searcher's mapping and `resources` into resources', each as ", key: value"."""
    text = CONFIG % {"searcher": searcher, "extra": extra, "slots": slots, "restarts": restarts, "resources": resources}
    return experiments_service.create(fx, s, owner(s), config_text=text, files=[], activate=activate)


def trials_of(s: Session, exp: models.Experiment) -> list[models.Trial]:
    return list(s.scalars(select(models.Trial).where(models.Trial.experiment_id == exp.id).order_by(models.Trial.id)))


def allocations_of(s: Session, trial: models.Trial) -> list[models.Allocation]:
    return list(
        s.scalars(
            select(models.Allocation)
            .where(models.Allocation.trial_id == trial.id)
            .order_by(models.Allocation.queued_at, models.Allocation.id)
        )
    )


def agent(s: Session, agent_id: str, *, slots: int = 1, pool: str = "default", now: float = 0.0) -> models.Agent:
    row = models.Agent(
        id=agent_id,
        hostname=agent_id,
        address="127.0.0.1",
        resource_pool=pool,
        slots=[{"id": f"{agent_id}-{i}", "type": "cpu"} for i in range(slots)],
        state=AgentState.CONNECTED,
        version="test",
        registered_at=now,
        last_heartbeat=now,
    )
    s.add(row)
    s.flush()
    return row


def assign(fx: ClusterEffects, s: Session, alloc: models.Allocation, *agent_ids: str) -> None:
    """Assign a pending allocation to agents (its slots split evenly, each agent's first free ones) as
    a scheduling pass does, through placement.apply: ASSIGNED, a task token, StartTask to each agent."""
    s.flush()  # apply reads the allocation with autoflush off
    per_agent = alloc.slots_needed // len(agent_ids)
    places = []
    for agent_id in agent_ids:
        used = {
            slot
            for held in allocations.held_on(s, agent_id)
            for p in held.assignment
            if p["agent_id"] == agent_id
            for slot in p["slot_ids"]
        }
        free = [sl["id"] for sl in s.get(models.Agent, agent_id).slots if sl["id"] not in used]
        assert len(free) >= per_agent, f"agent {agent_id} has {len(free)} free slot(s), {per_agent} wanted"
        places.append((agent_id, free[:per_agent]))
    placement.apply(fx, s, AgentHub(), [(alloc.id, places)])  # no connections: StartTask is only recorded


def run_on(fx: ClusterEffects, s: Session, alloc: models.Allocation, *agent_ids: str) -> None:
    """Assign a pending allocation to agents and report its process started on each: RUNNING. The
    task has called the master, as every real trial does (lifecycle/task_contact.py)."""
    assign(fx, s, alloc, *agent_ids)
    for agent_id in agent_ids:
        agent_events.task_started(fx, s, agent_id, alloc.id)
    alloc.contacted_at = fx.now


def hub_of(loop: asyncio.AbstractEventLoop, *agent_ids: str) -> AgentHub:
    """A hub with a live connection for each agent, reaching the master at http://m:8080."""
    hub = AgentHub()
    for agent_id in agent_ids:
        hub.attach(AgentConnection(agent_id=agent_id, master_url="http://m:8080", remote_host="10.0.0.5", loop=loop))
    return hub


def without_chief_port(assignment: list[dict]) -> list[dict]:
    """A trial's assignment without its chief's rendezvous port (each trial's chief gets one, its C10D_PORT,
    seeded by the allocation's random id), once that port is checked to lie in the default range."""
    port = assignment[0].get("port")
    assert isinstance(port, int) and 29400 <= port <= 29999, assignment
    return [{k: v for k, v in place.items() if k != "port"} for place in assignment]
