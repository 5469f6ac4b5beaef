"""The seam between the scheduling pass and the capacity its allocations run on: what the Controller asks of a
resource manager to learn of capacity and to place allocations on it. Agents are the one implementation today
(cluster/agent_resources.py); a Kubernetes one (nodes and pods) implements the same protocol, and the
scheduler's rules (pedl.scheduling) stay as they are. docs/internals.md has the contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from pydantic import BaseModel
    from sqlalchemy.orm import Session

    from pedl.config.master_config import MasterConfig
    from pedl.master.cluster.assignment import Prepared
    from pedl.master.cluster.pass_snapshot import PassSnapshot
    from pedl.master.cluster.placement import PassPlan, Placement
    from pedl.master.db.engine import Database
    from pedl.master.lifecycle.effects import ClusterEffects
    from pedl.master.lifecycle.task_specs import SpecCache


class ResourceManager(Protocol):
    """What places the cluster's allocations on capacity. The Controller calls these in this order, one pass at
    a time: `check` (under the lock), `snapshot` (outside it), then for each batch of the pass's placements
    `prepare` (outside it) and `place` (under it); after every commit, `deliver` for each message queued in it.
    `capacity` below is what one placement names (for agents: an agent id)."""

    def check(self, fx: ClusterEffects, s: Session) -> None:
        """Learn what capacity went away since the last pass and end what ran there (agents: one silent past
        agent_heartbeat_timeout is DISCONNECTED, one away past agent_reconnect_wait GONE, and what it held
        ends), in the caller's transaction, under the lock. It may keep what it read for the calls after."""

    def forget(self) -> None:
        """`check`'s transaction rolled back: what it kept from it is not so; read capacity afresh next time."""

    def snapshot(self, db: Database, config: MasterConfig) -> PassSnapshot:
        """What a pass decides on, read in one read-only transaction without the lock: the allocations that
        wait and those that hold slots, the experiments' settings, and the capacity that takes work now (in
        `agents`, each with its pool, slot ids and whether it runs containers; the slots held there in `used`
        and `zero_slot`; `spot`; the pools' instances). The pure scheduler places from it."""
        ...

    def prepare(
        self, fx: ClusterEffects, s: Session, decided: PassPlan, chunk: list[Placement], cache: SpecCache
    ) -> Prepared:
        """Make a batch of the pass's placements ready to write (task specs, tokens, what starts each), in the
        read-only session `s`, outside the lock; it writes nothing."""
        ...

    def place(self, fx: ClusterEffects, s: Session, ready: Prepared) -> None:
        """Write a prepared batch in the caller's transaction, under the lock: only the placements whose
        allocations are still PENDING in the pool they were planned for and whose capacity still takes work
        (the others wait for the next pass); what starts them is queued with `fx.send` and goes out through
        `deliver` once the transaction commits, or never if it rolls back."""

    def deliver(self, capacity: str, message: BaseModel) -> bool:
        """After a commit: hand a message (start or kill a task, ...) to the capacity it names. False when that
        capacity cannot be reached now: the message is dropped, and its reconnection (or the next `check`)
        settles what it was for. Never blocks; safe from any thread."""
        ...
