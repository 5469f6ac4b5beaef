"""The scaling decider: pure, state in, decisions out, time passed in. It decides which instances
to launch and terminate for one pool, and which waiting tasks can never fit.

pedl's policy places the waiting tasks with the scheduler's own fit model (fit.SlotBins) onto free
slots as the scheduler would, then onto instances already booting, then packs the rest (largest
first, a task's slots kept whole) onto new instances of the type that costs least per hour for
them. The Determined-style baseline divides the slot sum by one type's slots, as Determined does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from pedl.scheduling.fit import Fitting, SlotBins
from pedl.scheduling.pool_policy import PoolPolicy, TypeOffer

# a live instance's state as the decider names it: the master's InstanceState but TERMINATED
LiveState = Literal["requested", "starting", "running", "terminating"]


@dataclass(frozen=True)
class InstanceView:
    id: str
    instance_type: str
    state: LiveState
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
    """For min_instances, which no demand shapes: the first allowed type in list order, spot first
    when configured (any spot type before on-demand)."""
    for spot in _markets(policy):
        for offer in policy.types:
            if (offer.name, spot) not in blocked:
                return offer, spot
    return None


def decide(
    now: float,
    policy: PoolPolicy,
    instances: list[InstanceView],
    pending: list[PendingTask],
    *,
    launch_blocked_until: float | None = None,
    unavailable: set[tuple[str, bool]] | None = None,
) -> Decision:
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
    idle = sorted(
        (
            (i.idle_since, i)
            for i in live
            if i.id not in terminating
            and i.state == "running"
            and not i.busy
            and i.idle_since is not None
            and i.disconnected_since is None
        ),
        key=lambda pair: pair[0],
    )
    wanted_new = sum(n for _, _, n in new_counts)
    for idle_since, inst in idle:
        if inst.id in claimed:
            continue
        deadline = idle_since + policy.max_idle
        if now >= deadline and (inst.interrupted or alive > policy.min_instances):
            kill(inst, f"idle for more than {policy.max_idle:g}s")
            alive -= 0 if inst.interrupted else 1
        elif now < deadline:
            d.wake_at(deadline)

    # 4. bounds: trim above max (starting ones and idle ones first), fill up to min
    if alive > policy.max_instances:
        order = sorted(
            (i for i in live if i.id not in terminating and not i.interrupted),
            key=lambda i: (i.state == "running" and i.busy, i.state == "running", -i.launched_at),
        )
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


def _packed_demand(
    policy: PoolPolicy,
    usable: list[InstanceView],
    pending: list[PendingTask],
    d: Decision,
    blocked: set[tuple[str, bool]],
    claimed: set[str],
    room: int,
) -> list[tuple[TypeOffer, bool, int]]:
    """Where the waiting tasks go: onto the running agents' free slots as the scheduler's next pass
    would place them, then onto booting instances (wholly free bins of their size) the same way, then
    onto new instances (at most `room` of them), all through the scheduler's fit model."""
    if not pending:
        return []  # no demand: no bins to build (most passes of a quiet pool)
    largest_first = sorted(pending, key=lambda t: (-t.slots_needed, t.queued_at, t.allocation_id))
    fits = {need: _fits_some_type(need, policy) for need in {t.slots_needed for t in pending}}
    running: SlotBins[str] = SlotBins()
    booting: SlotBins[str] = SlotBins()
    zero = any(t.slots_needed == 0 for t in pending)  # only a task of no slots goes on a full agent
    for inst in usable:
        if inst.state == "running" and inst.disconnected_since is None:
            if inst.free_slots or zero:
                running.add(inst.id, inst.slots, inst.free_slots, preferred=inst.spot)
        elif inst.state in ("starting", "requested"):
            booting.add(inst.id, inst.slots, inst.slots, preferred=inst.spot)
    # the scheduler's order (FIFO; the decider does not see priorities): what fits now is no demand
    queue = sorted(pending, key=lambda t: (t.queued_at, t.allocation_id))
    left = _claim(_claim(queue, running, policy.fitting, claimed), booting, policy.fitting, claimed)
    waiting = {t.allocation_id for t in left}
    unplaced = [t for t in largest_first if t.allocation_id in waiting]
    d.never_fit += [
        (t.allocation_id, _never_fit_reason(t.slots_needed, policy)) for t in unplaced if not fits[t.slots_needed]
    ]
    return _new_capacity([t for t in unplaced if fits[t.slots_needed]], policy, blocked, room)


def _claim(tasks: list[PendingTask], bins: SlotBins[str], fitting: Fitting, claimed: set[str]) -> list[PendingTask]:
    """Place the tasks in order on the bins (claiming the instances they use); the ones left over."""
    left: list[PendingTask] = []
    if not len(bins):
        return list(tasks)
    for task in tasks:
        placed = None if task.slots_needed > 0 and bins.free_total == 0 else bins.place(task.slots_needed, fitting)
        if placed is None:
            left.append(task)
        else:
            claimed.update(key for key, _ in placed)
    return left


def _new_capacity(
    tasks: list[PendingTask], policy: PoolPolicy, blocked: set[tuple[str, bool]], room: int
) -> list[tuple[TypeOffer, bool, int]]:
    """New instances for tasks that nothing holds, largest need first: a task first fills room left
    in instances this decision opens; each need opens the (type, market) that costs least for its
    tasks (see _cheapest), and the room its instances leave serves smaller tasks."""
    opened: SlotBins[int] = SlotBins()
    counts: dict[tuple[str, bool], int] = {}
    used = 0
    i = 0
    while i < len(tasks):
        need = tasks[i].slots_needed
        j = i
        while j < len(tasks) and tasks[j].slots_needed == need:
            j += 1
        same_need, i = j - i, j
        if need > 0 and opened.free_total < need and used >= room:
            continue  # nothing holds this need and nothing more may open
        waiting = sum(1 for _ in range(same_need) if opened.place(need) is None)
        if not waiting or used >= room:
            continue
        choice = _cheapest(need, waiting, policy, blocked, room - used)
        if choice is None:
            continue  # no allowed (type, market) right now: wait
        offer, spot = choice
        per_task = _fits(need, offer, policy.max_instances)  # instances one task takes of it
        for _ in range(waiting):
            if opened.place(need) is not None:
                continue
            if used + per_task > room:
                break
            for _ in range(per_task):
                opened.add(len(opened), offer.slots, offer.slots)
            used += per_task
            counts[(offer.name, spot)] = counts.get((offer.name, spot), 0) + per_task
            opened.place(need)
    offers = {o.name: o for o in policy.types}
    return [(offers[name], spot, n) for (name, spot), n in counts.items()]


def _hourly(offer: TypeOffer, spot: bool) -> float:
    return offer.spot_price if spot and offer.spot_price is not None else offer.price


def _markets(policy: PoolPolicy) -> list[bool]:
    """Spot first when configured; on-demand only without spot, or as its fallback."""
    return ([True] if policy.spot else []) + ([False] if not policy.spot or policy.spot_fallback_to_on_demand else [])


def _cheapest(
    need: int, tasks: int, policy: PoolPolicy, blocked: set[tuple[str, bool]], room: int
) -> tuple[TypeOffer, bool] | None:
    """The (type, market) for `tasks` tasks of `need` slots each: of the first market (spot, then
    on-demand) with an allowed type that fits them, the type that holds the most of them within
    `room` new instances, then the one whose packing costs least per hour (instances x price), then
    the first listed. Prices are compared only when every candidate has one (else list order)."""
    for spot in _markets(policy):
        options = [o for o in policy.types if (o.name, spot) not in blocked and _fits(need, o, policy.max_instances)]
        if not options:
            continue
        priced = all(_hourly(o, spot) > 0 for o in options)

        def rank(indexed: tuple[int, TypeOffer], spot: bool = spot, priced: bool = priced) -> tuple[int, float, int]:
            index, offer = indexed
            if need == 0:
                held, instances = (tasks, 1) if room else (0, 0)
            elif need <= offer.slots:
                per_instance = offer.slots // need
                held = min(tasks, room * per_instance)
                instances = -(-held // per_instance)
            else:
                per_task = need // offer.slots
                held = min(tasks, room // per_task)
                instances = held * per_task
            cost = instances * _hourly(offer, spot) if priced else 0.0
            return -held, round(cost, 9), index

        return min(enumerate(options), key=rank)[1], spot
    return None


def _fits_some_type(need: int, policy: PoolPolicy) -> bool:
    return any(_fits(need, o, policy.max_instances) for o in policy.types)


def _never_fit_reason(need: int, policy: PoolPolicy) -> str:
    largest = max((o.slots for o in policy.types), default=0)
    return (
        f"needs {need} slot(s); no allowed instance type fits it "
        f"(types: {', '.join(f'{o.name}={o.slots}' for o in policy.types)}; largest "
        f"{largest}, at most {policy.max_instances} instance(s))"
    )


def _determined_demand(
    policy: PoolPolicy, usable: list[InstanceView], pending: list[PendingTask], d: Decision
) -> list[tuple[TypeOffer, bool, int]]:
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
