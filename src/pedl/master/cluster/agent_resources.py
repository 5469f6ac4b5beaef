"""Agents as the cluster's capacity: the resource manager (cluster/resource_manager.py) the Controller uses today.
Capacity is the agents connected to the hub, as their rows say (kept from one pass to the next by KnownAgents);
a placement starts as StartTask sent over the agent's connection."""

from __future__ import annotations

from pydantic import BaseModel
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig
from pedl.master.cluster import agent_events, assignment, pass_snapshot, placement
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.db.engine import Database
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.task_specs import SpecCache


class AgentResources:
    """Implements ResourceManager over the agent hub and the agents' rows."""

    def __init__(self, hub: AgentHub, known: KnownAgents) -> None:
        self.hub = hub
        self.known = known  # the agents' rows, from one pass to the next

    def check(self, fx: ClusterEffects, s: Session) -> None:
        agent_events.check_agents(fx, s, self.hub, self.known)

    def forget(self) -> None:
        self.known.forget()

    def snapshot(self, db: Database, config: MasterConfig) -> pass_snapshot.PassSnapshot:
        return pass_snapshot.read(db, config, self.hub, self.known)

    def prepare(
        self,
        fx: ClusterEffects,
        s: Session,
        decided: placement.PassPlan,
        chunk: list[placement.Placement],
        cache: SpecCache,
    ) -> assignment.Prepared:
        return placement.prepare_planned(fx, s, self.hub, decided, chunk, cache, self.known)

    def place(self, fx: ClusterEffects, s: Session, ready: assignment.Prepared) -> None:
        """Only the rows whose agents may all still take work now (the agents' rows as kept: a dictionary lookup
        each, unless something changed them since they were read)."""
        assignment.write(fx, s, ready.on_usable(self.known.usable(s, self.hub, ready.agent_ids())))

    def deliver(self, capacity: str, message: BaseModel) -> bool:
        return self.hub.send(capacity, message)
