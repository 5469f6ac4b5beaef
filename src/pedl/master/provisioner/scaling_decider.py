"""The scaling decider: pure, state in, decisions out, time passed in. It decides which instances
to launch and terminate for one pool, and which waiting tasks can never fit.

pedl's policy bin-packs the waiting tasks (first-fit decreasing, a task's slots kept whole) onto
free slots, then onto instances already booting, then onto new instances of the first allowed
type. The Determined-style baseline divides the slot sum by one type's slots, as Determined does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

Policy = Literal["pedl", "determined"]


@dataclass(frozen=True)
class TypeOffer:
    name: str
    slots: int
    price: float = 0.0


@dataclass(frozen=True)
class InstanceView:
    id: str
    instance_type: str
    state: Literal["requested", "starting", "running", "terminating"]
    launched_at: float
    slots: int
    spot: bool = False
    free_slots: int = 0  # running only: slots no allocation holds
    busy: bool = False  # running only: holds at least one allocation
    idle_since: float | None = None  # running and not busy: since when
    disconnected_since: float | None = None  # running: its agent is disconnected since
    interrupted: bool = False  # a spot interruption notice arrived; it will go away


@dataclass(frozen=True)
class PendingTask:
    allocation_id: str
    slots_needed: int
    queued_at: float = 0.0


@dataclass(frozen=True)
class PoolPolicy:
    types: tuple[TypeOffer, ...]
    max_instances: int = 5
    min_instances: int = 0
    max_idle: float = 300.0
    max_starting: float = 1200.0
    max_disconnected: float = 600.0
    spot: bool = False
    spot_request_timeout: float = 120.0
    spot_fallback_to_on_demand: bool = True
    policy: Policy = "pedl"


@dataclass
class Launch:
    instance_type: str
    count: int
    spot: bool
    slots: int


@dataclass
class Decision:
    launch: list[Launch] = field(default_factory=list)
    terminate: list[tuple[str, str]] = field(default_factory=list)  # (id, reason)
    never_fit: list[tuple[str, str]] = field(default_factory=list)  # (allocation id, reason)
    unavailable: list[tuple[str, bool]] = field(default_factory=list)  # (type, spot) to avoid for now
    next_check_at: float | None = None

    def wake_at(self, t: float) -> None:
        if self.next_check_at is None or t < self.next_check_at:
            self.next_check_at = t


def _fits(task_slots: int, offer: TypeOffer, max_instances: int) -> int:
    """Instances of this type one task needs (0 = it cannot use this type)."""
    if task_slots == 0:
        return 1
    if offer.slots <= 0:
        return 0
    if task_slots <= offer.slots:
        return 1
    if task_slots % offer.slots == 0 and task_slots // offer.slots <= max_instances:
        return task_slots // offer.slots
    return 0


def _choose(policy: PoolPolicy, blocked: set[tuple[str, bool]]) -> tuple[TypeOffer, bool] | None:
    """The first allowed (type, spot) pair: spot first when configured, then on-demand of the same
    type (fallback), then the next type."""
    for offer in policy.types:
        if policy.spot and (offer.name, True) not in blocked:
            return offer, True
        if (not policy.spot or policy.spot_fallback_to_on_demand) and (offer.name, False) not in blocked:
            return offer, False
    return None


def decide(now: float, policy: PoolPolicy, instances: list[InstanceView], pending: list[PendingTask], *,
           launch_blocked_until: float | None = None,
           unavailable: set[tuple[str, bool]] | None = None) -> Decision:
    d = Decision()
    blocked = set(unavailable or ())
    live = [i for i in instances if i.state != "terminating"]
    terminating: set[str] = set()

    def kill(inst: InstanceView, reason: str) -> None:
        if inst.id not in terminating:
            terminating.add(inst.id)
            d.terminate.append((inst.id, reason))

    # 1. what has failed: unfulfilled spot requests, instances that never registered, lost agents
    for inst in live:
        if inst.state == "requested":
            deadline = inst.launched_at + policy.spot_request_timeout
            if now >= deadline:
                kill(inst, f"spot request unfulfilled after {policy.spot_request_timeout:g}s")
                d.unavailable.append((inst.instance_type, True))
                blocked.add((inst.instance_type, True))
            else:
                d.wake_at(deadline)
        elif inst.state == "starting":
            deadline = inst.launched_at + policy.max_starting
            if now >= deadline:
                kill(inst, f"did not register an agent within {policy.max_starting:g}s")
            else:
                d.wake_at(deadline)
        elif inst.disconnected_since is not None:
            deadline = inst.disconnected_since + policy.max_disconnected
            if now >= deadline:
                kill(inst, f"agent disconnected for more than {policy.max_disconnected:g}s")
            else:
                d.wake_at(deadline)

    # 2. demand
    usable = [i for i in live if i.id not in terminating and not i.interrupted]
    claimed: set[str] = set()  # instances a waiting task is about to use
    if policy.policy == "determined":
        new_counts = _determined_demand(policy, usable, pending, d)
    else:
        new_counts = _packed_demand(policy, usable, pending, d, blocked, claimed)

    # 3. idle instances, never below min_instances, and never while demand would reuse them
    alive = len([i for i in live if i.id not in terminating])
    idle = sorted((i for i in usable if i.state == "running" and not i.busy and i.idle_since is not None
                   and i.disconnected_since is None), key=lambda i: i.idle_since)
    wanted_new = sum(n for _, _, n in new_counts)
    for inst in idle:
        if inst.id in claimed:
            continue
        deadline = inst.idle_since + policy.max_idle
        if now >= deadline and alive > policy.min_instances:
            kill(inst, f"idle for more than {policy.max_idle:g}s")
            alive -= 1
        elif now < deadline:
            d.wake_at(deadline)

    # 4. bounds: trim above max (starting ones and idle ones first), fill up to min
    if alive > policy.max_instances:
        order = sorted((i for i in live if i.id not in terminating),
                       key=lambda i: (i.state == "running" and i.busy, i.state == "running", -i.launched_at))
        for inst in order[: alive - policy.max_instances]:
            kill(inst, f"above max_instances ({policy.max_instances})")
        alive = policy.max_instances
    room = policy.max_instances - alive
    if alive + wanted_new < policy.min_instances:
        choice = _choose(policy, blocked)
        if choice is not None:
            new_counts.append((choice[0], choice[1], policy.min_instances - alive - wanted_new))

    # 5. launches, unless a recent launch error holds them back
    if launch_blocked_until is not None and now < launch_blocked_until:
        if any(n for _, _, n in new_counts):
            d.wake_at(launch_blocked_until)
        return d
    merged: dict[tuple[str, bool], int] = {}
    for offer, spot, n in new_counts:
        take = min(n, room)
        if take > 0:
            merged[(offer.name, spot)] = merged.get((offer.name, spot), 0) + take
            room -= take
    slots_of = {o.name: o.slots for o in policy.types}
    d.launch = [Launch(name, n, spot, slots_of[name]) for (name, spot), n in merged.items()]
    return d


def _packed_demand(policy: PoolPolicy, usable: list[InstanceView], pending: list[PendingTask], d: Decision,
                   blocked: set[tuple[str, bool]], claimed: set[str]) -> list[tuple[TypeOffer, bool, int]]:
    # bins: free slots of running agents, then whole booting instances (largest first)
    running = [i for i in usable if i.state == "running" and i.disconnected_since is None]
    booting_insts = sorted((i for i in usable if i.state in ("starting", "requested")), key=lambda i: -i.slots)
    bins = [i.free_slots for i in running]
    empty_booting = [i.slots for i in booting_insts]
    bin_ids = ([i.id for i in running], [i.id for i in booting_insts])
    choice = _choose(policy, blocked)
    new: dict[tuple[str, bool], list[int]] = {}
    for task in sorted(pending, key=lambda t: (-t.slots_needed, t.queued_at, t.allocation_id)):
        fits_any = [o for o in policy.types if _fits(task.slots_needed, o, policy.max_instances)]
        if not fits_any:
            largest = max((o.slots for o in policy.types), default=0)
            d.never_fit.append((task.allocation_id,
                                f"needs {task.slots_needed} slot(s); no allowed instance type fits it "
                                f"(types: {', '.join(f'{o.name}={o.slots}' for o in policy.types)}; largest "
                                f"{largest}, at most {policy.max_instances} instance(s))"))
            continue
        need = task.slots_needed
        # a task that fits one instance goes into the first bin with room (existing, booting, new)
        placed = False
        for pool_bins, ids in zip((bins, empty_booting), bin_ids, strict=True):
            for k, free in enumerate(pool_bins):
                if (need == 0 and free >= 0) or (0 < need <= free):
                    pool_bins[k] = free - need
                    claimed.add(ids[k])
                    placed = True
                    break
            if placed:
                break
        if not placed and need > 0:
            placed = _claim_whole(need, running, bins, booting_insts, empty_booting, claimed)
        if placed:
            continue
        if choice is None:
            continue  # every type is unavailable right now; wait for the block to lapse
        offer, spot = choice
        count = _fits(need, offer, policy.max_instances)
        if count == 0:
            offer = fits_any[0]
            count = _fits(need, offer, policy.max_instances)
            spot = policy.spot and (offer.name, True) not in blocked
        if count == 1:
            new_bins = new.setdefault((offer.name, spot), [])
            for k, free in enumerate(new_bins):
                if need <= free:
                    new_bins[k] = free - need
                    break
            else:
                new_bins.append(offer.slots - need)
        else:  # a gang of whole instances
            new.setdefault((offer.name, spot), []).extend([0] * count)
    offers = {o.name: o for o in policy.types}
    return [(offers[name], spot, len(b)) for (name, spot), b in new.items()]


def _claim_whole(need: int, running: list[InstanceView], bins: list[int], booting: list[InstanceView],
                 empty_booting: list[int], claimed: set[str]) -> bool:
    """A gang task takes several wholly free instances of one size (running or booting)."""
    candidates: dict[int, list[tuple[list[int], int, str]]] = {}
    for insts, frees in ((running, bins), (booting, empty_booting)):
        for k, inst in enumerate(insts):
            if inst.slots > 0 and frees[k] == inst.slots and need % inst.slots == 0:
                candidates.setdefault(inst.slots, []).append((frees, k, inst.id))
    for size, group in sorted(candidates.items(), reverse=True):
        if len(group) >= need // size:
            for frees, k, inst_id in group[: need // size]:
                frees[k] = 0
                claimed.add(inst_id)
            return True
    return False


def _determined_demand(policy: PoolPolicy, usable: list[InstanceView], pending: list[PendingTask],
                       d: Decision) -> list[tuple[TypeOffer, bool, int]]:
    """Determined's rule: ceil(sum of fitting tasks' slots / slots per agent) minus booting instances;
    one type; tasks that fit no agent are ignored (they wait forever)."""
    offer = policy.types[0]
    total = 0
    for task in pending:
        if task.slots_needed <= offer.slots or (offer.slots and task.slots_needed % offer.slots == 0):
            total += task.slots_needed
        else:
            d.never_fit.append((task.allocation_id, "ignored by the Determined-style policy"))
    per = max(offer.slots, 1)
    desired = math.ceil(total / per) if total else (1 if any(t.slots_needed == 0 for t in pending) else 0)
    booting = len([i for i in usable if i.state in ("starting", "requested")])
    return [(offer, policy.spot, max(0, desired - booting))]
