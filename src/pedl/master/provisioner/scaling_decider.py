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
        room0 = policy.max_instances - len([i for i in live if i.id not in terminating and not i.interrupted])
        new_counts = _packed_demand(policy, usable, pending, d, blocked, claimed, max(room0, 0))

    # 3. idle instances, never below min_instances, and never while demand would reuse them;
    # an instance the cloud is reclaiming counts for neither bound
    alive = len([i for i in live if i.id not in terminating and not i.interrupted])
    idle = sorted((i for i in live if i.id not in terminating and i.state == "running" and not i.busy
                   and i.idle_since is not None and i.disconnected_since is None), key=lambda i: i.idle_since)
    wanted_new = sum(n for _, _, n in new_counts)
    for inst in idle:
        if inst.id in claimed:
            continue
        deadline = inst.idle_since + policy.max_idle
        if now >= deadline and (inst.interrupted or alive > policy.min_instances):
            kill(inst, f"idle for more than {policy.max_idle:g}s")
            alive -= 0 if inst.interrupted else 1
        elif now < deadline:
            d.wake_at(deadline)

    # 4. bounds: trim above max (starting ones and idle ones first), fill up to min
    if alive > policy.max_instances:
        order = sorted((i for i in live if i.id not in terminating and not i.interrupted),
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


class _Bins:
    """Free slots per bin, bucketed by free count, so each placement is a walk over at most
    max-slots buckets (10,000 tasks on 1,000 instances stay fast). Best fit: the fullest bin
    that still has room."""

    def __init__(self) -> None:
        self.free: dict[object, int] = {}
        self.buckets: dict[int, dict[object, None]] = {}
        self.max_free = 0

    def add(self, key: object, free: int) -> None:
        self.free[key] = free
        self.buckets.setdefault(free, {})[key] = None
        self.max_free = max(self.max_free, free)

    def set(self, key: object, free: int) -> None:
        del self.buckets[self.free[key]][key]
        self.add(key, free)

    def place(self, need: int) -> object | None:
        for count in range(need, self.max_free + 1):
            bucket = self.buckets.get(count)
            if bucket:
                key = next(iter(bucket))
                self.set(key, count - need)
                return key
        return None


def _packed_demand(policy: PoolPolicy, usable: list[InstanceView], pending: list[PendingTask], d: Decision,
                   blocked: set[tuple[str, bool]], claimed: set[str], room: int) -> list[tuple[TypeOffer, bool, int]]:
    """First-fit decreasing over: free slots of running agents, booting instances, new instances
    (at most `room` of them)."""
    existing = _Bins()
    whole: dict[int, list[str]] = {}  # slots -> wholly free instances, for gang tasks
    for inst in usable:
        if inst.state == "running" and inst.disconnected_since is None:
            free = inst.free_slots
        elif inst.state in ("starting", "requested"):
            free = inst.slots
        else:
            continue
        existing.add(inst.id, free)
        if inst.slots > 0 and free == inst.slots:
            whole.setdefault(inst.slots, []).append(inst.id)
    new = _Bins()
    new_count: dict[tuple[str, bool], int] = {}
    choice = _choose(policy, blocked)
    offers = {o.name: o for o in policy.types}
    for task in sorted(pending, key=lambda t: (-t.slots_needed, t.queued_at, t.allocation_id)):
        need = task.slots_needed
        fits_any = [o for o in policy.types if _fits(need, o, policy.max_instances)]
        if not fits_any:
            largest = max((o.slots for o in policy.types), default=0)
            d.never_fit.append((task.allocation_id,
                                f"needs {need} slot(s); no allowed instance type fits it "
                                f"(types: {', '.join(f'{o.name}={o.slots}' for o in policy.types)}; largest "
                                f"{largest}, at most {policy.max_instances} instance(s))"))
            continue
        key = existing.place(need) if need <= existing.max_free else None
        if key is not None:
            claimed.add(key)  # type: ignore[arg-type]
            continue
        if need > 0 and _claim_whole(need, whole, existing, claimed):
            continue
        if new.place(need) is not None:
            continue
        if choice is None or sum(new_count.values()) >= room:
            continue  # no type available right now, or no room: wait
        offer, spot = choice
        count = _fits(need, offer, policy.max_instances)
        if count == 0:
            offer = fits_any[0]
            count = _fits(need, offer, policy.max_instances)
            spot = policy.spot and (offer.name, True) not in blocked
        if sum(new_count.values()) + count > room:
            continue
        new_count[(offer.name, spot)] = new_count.get((offer.name, spot), 0) + count
        if count == 1:
            new.add(("new", len(new.free)), offer.slots - need)
    return [(offers[name], spot, n) for (name, spot), n in new_count.items()]


def _claim_whole(need: int, whole: dict[int, list[str]], existing: _Bins, claimed: set[str]) -> bool:
    """A gang task takes several wholly free instances of one size (running or booting)."""
    for size in sorted(whole, reverse=True):
        if need % size:
            continue
        ids = [i for i in whole[size] if existing.free.get(i) == size]
        if len(ids) >= need // size:
            for inst_id in ids[: need // size]:
                existing.set(inst_id, 0)
                claimed.add(inst_id)
            whole[size] = [i for i in whole[size] if existing.free.get(i) == size]
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
