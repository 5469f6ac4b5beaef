"""The effects cluster operations have beyond their own transaction, as a protocol: the time, the
master's config, messages to agents, wake-ups, checkpoint GC requests and the preemption signal.

The Controller implements it; allocation operations, agent events, placement and experiment
progression take it instead of the Controller, so none of them depends on the Controller (and the
Controller, which calls them, is the only module that knows how the effects are carried out).
A leaf module: it imports nothing of the master but the config and the wire models."""

from __future__ import annotations

from typing import Protocol

from pedl.common.agent_protocol import MasterMessage
from pedl.config.master_config import MasterConfig


class ClusterEffects(Protocol):
    @property
    def now(self) -> float:
        """The injected clock's time: one source for every decision."""
        ...

    @property
    def config(self) -> MasterConfig:
        """The master's config: resource pools, schedulers, timeouts, port ranges."""
        ...

    @property
    def cluster_id(self) -> str: ...

    def send(self, agent_id: str, msg: MasterMessage) -> None:
        """Send a message to an agent once the current transaction commits (dropped if it rolls back)."""
        ...

    def wake(self) -> None:
        """Ask for a scheduling pass soon (something placeable may have changed)."""
        ...

    def wake_provisioners(self) -> None:
        """Ask the pools' provisioners for a pass now (demand or capacity changed)."""
        ...

    def want_checkpoint_gc(self, experiment_id: int) -> None:
        """Ask for checkpoint garbage collection of an experiment, done later outside the lock."""
        ...

    def signal_preemption(self, allocation_id: str) -> None:
        """Raise the allocation's preemption signal (its task's long poll answers at once)."""
        ...

    def allocation_closed(self, allocation_id: str) -> None:
        """The allocation ended: its preemption signal and its task token die with it."""
        ...
