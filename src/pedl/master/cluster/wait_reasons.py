"""Why a queued allocation waits, in words a user can act on. Pure: the scheduling pass gives it the
pool as it saw it; the reason is stored on the allocation and shown wherever the allocation is.

The reasons, first that applies:
- the experiment's resources.max_slots (`max_slots_reason`: the scheduler held the trial back for it);
- a zero-slot task every agent of the pool already runs the most zero-slot tasks of (`zero_slot_reason`);
- a static pool with no usable agent, or none (alone or as whole agents together) large enough;
- behind N allocations of higher priority in the queue (when the pool's agents could hold it);
- a dynamic pool: instances booting, the pool at max_instances, or an instance about to be launched;
- waiting for slots to be freed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class WaitKind(StrEnum):
    NO_AGENTS = "no_agents"
    TOO_LARGE = "too_large"
    BOOTING = "booting"
    AT_MAX = "at_max"
    LAUNCHING = "launching"
    BEHIND = "behind"
    NO_FREE_SLOTS = "no_free_slots"
    MAX_SLOTS = "max_slots"
    NEEDS_CONTAINERS = "needs_containers"
    ZERO_SLOT_CAP = "zero_slot_cap"


@dataclass(frozen=True)
class PoolView:
    """The pool as the scheduling pass saw it."""

    name: str
    agent_slots: Sequence[int]  # total slots of each usable agent (connected, enabled, not draining)
    free_slots: int  # free slots over those agents
    dynamic: bool = False
    max_instances: int = 0
    live_instances: int = 0  # requested, starting or running
    booting_instances: int = 0  # requested or starting
    container_agents: int = 0  # of those agents, how many run containers


@dataclass(frozen=True)
class WaitReason:
    kind: WaitKind
    text: str


def can_ever_fit(need: int, agent_slots: Sequence[int]) -> bool:
    """Whether `need` slots fit on these agents when all are free: on one agent, or on whole agents
    whose sizes add up to exactly `need` (how the scheduler places a distributed task)."""
    if need <= 0:
        return bool(agent_slots)
    if any(size >= need for size in agent_slots):
        return True
    reachable = 1  # bit i: i slots are the sum of some whole agents
    for size in agent_slots:
        if size > 0:
            reachable |= reachable << size
            reachable &= (1 << (need + 1)) - 1
    return bool(reachable >> need & 1)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def reason(need: int, pool: PoolView, ahead_more_urgent: int) -> WaitReason:
    """Why an allocation of `need` slots in `pool` was not placed in this pass; `ahead_more_urgent`
    counts the unplaced allocations of the pool with a more urgent priority."""
    fits = can_ever_fit(need, pool.agent_slots)
    if not pool.dynamic:
        if not pool.agent_slots:
            return WaitReason(WaitKind.NO_AGENTS, f"no agent is connected in pool {pool.name}")
        if not fits:
            return WaitReason(
                WaitKind.TOO_LARGE,
                f"no agent in pool {pool.name} is large enough: it needs {_plural(need, 'slot')}, "
                f"the largest agent has {max(pool.agent_slots)} and whole agents cannot add up "
                f"to {need}",
            )
    if ahead_more_urgent and fits:
        return WaitReason(
            WaitKind.BEHIND, f"behind {_plural(ahead_more_urgent, 'trial')} of higher priority in pool {pool.name}"
        )
    if pool.dynamic:
        if pool.booting_instances:
            return WaitReason(
                WaitKind.BOOTING, f"{_plural(pool.booting_instances, 'instance')} booting in pool {pool.name}"
            )
        if pool.max_instances and pool.live_instances >= pool.max_instances:
            return WaitReason(
                WaitKind.AT_MAX,
                f"pool {pool.name} is at max_instances ({pool.max_instances}); "
                f"{_plural(need, 'slot')} must be freed first",
            )
        return WaitReason(WaitKind.LAUNCHING, f"an instance is to be launched in pool {pool.name}")
    return WaitReason(
        WaitKind.NO_FREE_SLOTS,
        f"needs {_plural(need, 'free slot')} in pool {pool.name} ({pool.free_slots} of {sum(pool.agent_slots)} free)",
    )


def container_reason(pool: PoolView) -> WaitReason | None:
    """Why a task that runs in a container waits on a static pool none of whose agents runs
    containers; None when that is not why."""
    if pool.dynamic or not pool.agent_slots or pool.container_agents:
        return None
    return WaitReason(
        WaitKind.NEEDS_CONTAINERS,
        f"its experiment names an environment.image, and none of the "
        f"{_plural(len(pool.agent_slots), 'agent')} of pool {pool.name} runs containers "
        f"(start an agent where Docker runs, or with --container-runtime docker)",
    )


def zero_slot_reason(pool: PoolView, cap: int) -> WaitReason:
    """Why a zero-slot task waits when every agent of its pool runs `cap` zero-slot tasks already."""
    return WaitReason(
        WaitKind.ZERO_SLOT_CAP,
        f"every agent of pool {pool.name} runs {cap} tasks of no slots already "
        f"(limits.max_zero_slot_tasks_per_agent); it starts when one of them ends",
    )


def max_slots_reason(need: int, max_slots: int, held: int) -> WaitReason:
    """Why a trial of `need` slots waits when its experiment's max_slots held it back, its trials
    holding `held` slots."""
    if need > max_slots:
        return WaitReason(
            WaitKind.MAX_SLOTS,
            f"the experiment's max_slots ({max_slots}) is less than the trial's {_plural(need, 'slot')}: "
            f"raise it (det e set max-slots) for the trial to run",
        )
    return WaitReason(
        WaitKind.MAX_SLOTS,
        f"waiting on the experiment's max_slots: its trials hold {held} of {max_slots} slot(s), the trial needs {need}",
    )


def static_pool_warning(need: int, pool_name: str, agent_slots: Sequence[int]) -> str | None:
    """At create, on a pool without a provider: a warning when no agent registered in the pool could
    ever hold the trial (None when one could)."""
    if not agent_slots:
        return (
            f"pool {pool_name} has no agents yet: the trials wait until an agent with {_plural(need, 'slot')} registers"
        )
    if can_ever_fit(need, agent_slots):
        return None
    return (
        f"no agent in pool {pool_name} can hold a trial of {_plural(need, 'slot')} "
        f"(the largest has {max(agent_slots)}); the trials wait until a larger agent registers"
    )
