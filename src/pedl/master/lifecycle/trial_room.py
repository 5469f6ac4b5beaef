"""How many live trials an experiment may have now: its pool's capacity in trials, so trials are
created as the pool can run them instead of all at once. Pure arithmetic plus one read of agents."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.master.db import models
from pedl.master.lifecycle.states import AgentState

# trials created in one transaction (a create request, a close, a top-up pass), so that none of
# them holds the cluster lock long whatever the pool's size; the rest come in later passes
TRIALS_PER_PASS = 100


def pool_slots(pool: ResourcePoolConfig, registered_slots: int) -> int:
    """Slots the pool can offer at most: a provider's max_instances of its largest allowed type,
    or the slots of a static pool's registered agents."""
    if pool.provider is None:
        return registered_slots
    largest = max((pool.provider.slots_of(t) for t in pool.provider.instance_types()), default=0)
    return pool.provider.max_instances * largest


def capacity_in_trials(slots: int, slots_per_trial: int, floor: int) -> int:
    """Trials of `slots_per_trial` that fit in `slots` (a zero-slot trial counts as one slot), at
    least `floor` so that trials exist and wait, and the provisioner sees them, on an empty pool."""
    return max(slots // max(slots_per_trial, 1), floor, 1)


def registered_slots(s: Session, pool_name: str) -> int:
    rows = s.scalars(
        select(models.Agent.slots).where(models.Agent.resource_pool == pool_name, models.Agent.state != AgentState.GONE)
    )
    return sum(len(slots or []) for slots in rows)


class RoomCalculator:
    """Capacity in trials per (pool, slots per trial), each read at most once per transaction."""

    def __init__(self, s: Session, config: MasterConfig) -> None:
        self.s, self.config = s, config
        self._slots: dict[str, int] = {}

    def slots(self, pool_name: str) -> int:
        if pool_name not in self._slots:
            pool = self.config.pool(pool_name)
            if pool is None:  # the pool left master.yaml: trials wait, as few as possible
                self._slots[pool_name] = 0
            else:
                self._slots[pool_name] = pool_slots(
                    pool, registered_slots(self.s, pool_name) if pool.provider is None else 0
                )
        return self._slots[pool_name]

    def capacity(self, pool_name: str, slots_per_trial: int) -> int:
        return capacity_in_trials(
            self.slots(pool_name), slots_per_trial, self.config.limits.min_live_trials_per_experiment
        )

    def room(self, pool_name: str, slots_per_trial: int, live: int) -> int:
        """Live trials allowed now: the capacity, but at most TRIALS_PER_PASS more than `live`."""
        return min(self.capacity(pool_name, slots_per_trial), live + TRIALS_PER_PASS)
