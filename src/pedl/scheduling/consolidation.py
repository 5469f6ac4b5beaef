"""The move planner: pure, state in, moves out, time passed in. It plans which checkpointed trials to
move so that an instance can go away: consolidation (the trials of a half-empty instance fit in the
free slots of others) and spot first (the trials of an on-demand instance fit on spot capacity, which
it asks for when there is none). The provisioner carries the plan out through the preemption path
(checkpoint, leave, be placed again) and the simulator replays it; both call `plan_moves`.

A move is planned only when it pays: the instance's price over the time its trials would still have
kept it, against the checkpoint and restore time the move costs and the time the trials add to their
new hosts (a fresh spot instance's whole bill while they run there). A pool's disruption budget caps
the moves per hour; a trial that has never checkpointed, or opted out (`resources.movable: false`),
or was started or moved less than `min_runtime_between_moves` ago, never moves. A gang moves whole.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pedl.config.consolidation_config import ConsolidationConfig

HOUR = 3600.0


@dataclass(frozen=True)
class MovePolicy:
    enabled: bool = True
    max_moves_per_hour: int = 20
    min_runtime_between_moves: float = 1800.0
    min_saving_per_hour: float = 0.5  # USD/h
    checkpoint_cost: float = 60.0  # seconds a move spends checkpointing (the source still runs)
    restore_cost: float = 60.0  # seconds a moved trial spends restoring on its new host
    boot_time: float = 90.0  # expected boot of a replacement instance
    # free slots the pool keeps after its moves, so that new work starts without waiting for a boot
    keep_free_slots: int = 0
    # a long checkpointed trial gives its slots to new work waiting for a boot (yielding.py), if it
    # is expected to run at least this much longer
    yield_to_new_work: bool = True
    min_remaining_to_yield: float = 3600.0


def policy_from_config(config: ConsolidationConfig, boot_time: float | None = None) -> MovePolicy:
    """The planner's policy from a pool's `consolidation:` section (and its expected boot time)."""
    return MovePolicy(
        enabled=config.enabled,
        max_moves_per_hour=config.max_moves_per_hour,
        min_runtime_between_moves=config.min_trial_runtime_between_moves,
        min_saving_per_hour=config.min_saving_per_hour,
        checkpoint_cost=config.checkpoint_cost,
        restore_cost=config.restore_cost,
        keep_free_slots=config.keep_free_slots,
        yield_to_new_work=config.yield_to_new_work,
        min_remaining_to_yield=config.min_remaining_to_yield,
        boot_time=MovePolicy.boot_time if boot_time is None else boot_time,
    )


@dataclass(frozen=True)
class HostView:
    """An instance as the planner sees it."""

    id: str
    instance_type: str
    slots: int
    free: int  # slots no task holds (and no waiting task is about to take)
    price: float  # USD/h as billed (the spot price for spot)
    spot: bool = False
    ready: bool = True  # running with a connected agent: it can take a moved trial now
    draining: bool = False  # already being emptied by an earlier move
    launched_at: float | None = None  # when a booting one was launched: it is expected ready boot_time later


@dataclass(frozen=True)
class TaskView:
    """A running trial's allocation."""

    allocation_id: str
    placements: tuple[tuple[str, int], ...]  # (instance id, slots held there)
    movable: bool  # it has checkpointed at least once and its experiment allows moves
    remaining: float | None  # expected seconds of work left; None: unknown (never moved)
    since: float  # when it started on its current instances (its last move, or its start)
    priority: int = 42  # the scheduler's (lower is more urgent): it yields only to work as urgent

    @property
    def slots(self) -> int:
        return sum(n for _, n in self.placements)


@dataclass(frozen=True)
class SpotOffer:
    """A type the pool may launch as spot now (not blocked), with its spot price."""

    instance_type: str
    slots: int
    price: float


@dataclass(frozen=True)
class Move:
    allocation_id: str
    source: tuple[str, ...]  # the instances it leaves
    target: tuple[str, ...]  # where it fits now ("new:<type>" for a replacement being launched)
    saving_per_hour: float  # USD/h the pool spends less once the source is gone
    saving: float  # USD over the trial's expected remaining time, costs deducted
    reason: str
    yield_to: str | None = None  # the waiting work it gives its slots to (yielding.py), for a yield


@dataclass
class MovePlan:
    moves: list[Move] = field(default_factory=list)
    drain: list[tuple[str, str]] = field(default_factory=list)  # (instance id, reason): take no new work
    launch: list[tuple[str, int, str]] = field(default_factory=list)  # (type, count, reason): spot replacements
    # on-demand instances that take no new work while spot capacity is there (all others take work)
    cordon: list[tuple[str, str]] = field(default_factory=list)
    next_check_at: float | None = None  # when a trial not movable now becomes movable


def moves_left(now: float, policy: MovePolicy, recent_moves: Sequence[float]) -> int:
    """The disruption budget: moves allowed now, given when the recent ones were made."""
    return max(policy.max_moves_per_hour - sum(1 for t in recent_moves if now - t < HOUR), 0)


def plan_moves(
    now: float,
    policy: MovePolicy,
    hosts: Sequence[HostView],
    tasks: Sequence[TaskView],
    *,
    recent_moves: Sequence[float] = (),
    spot_offers: Sequence[SpotOffer] = (),
    max_new_instances: int = 0,
) -> MovePlan:
    """Which instances to empty and which trials that moves. `spot_offers` (for a spot pool whose spot
    capacity is available) lets it ask for spot replacements of on-demand instances, at most
    `max_new_instances` of them; an instance already draining or not ready is never a target."""
    plan = MovePlan()
    if not policy.enabled or not hosts:
        return plan
    budget = moves_left(now, policy, recent_moves)
    on: dict[str, list[TaskView]] = {h.id: [] for h in hosts}
    for task in tasks:
        for host_id, _ in task.placements:
            if host_id in on:
                on[host_id].append(task)
    by_id = {h.id: h for h in hosts}
    free = {h.id: h.free for h in hosts}
    busy_targets: set[str] = set()  # hosts that receive in this plan: not emptied in it
    emptied: set[str] = set()

    def waiting_for(task: TaskView) -> float | None:
        ready_at = task.since + policy.min_runtime_between_moves
        return ready_at if ready_at > now else None

    cordoned: set[str] = set()
    if spot_offers:
        # spot first: while spot capacity is there, an on-demand instance takes no new work; its trials
        # finish there, or move to spot once they can
        for h in hosts:
            if not h.spot and not h.draining:
                cordoned.add(h.id)
                plan.cordon.append((h.id, "on-demand while spot capacity is available: new work goes to spot"))
    candidates = []
    open0 = [h for h in hosts if h.ready and not h.draining and h.id not in cordoned]
    pool_free0 = sum(h.free for h in open0)
    # where a trial could go now: a host with work and room at a lower price per slot, or an idle one
    # cheaper than what would leave; a source that neither allows is no candidate (the loop below
    # checks the same again after each move, when targets have filled up)
    busy_min0, idle_min0 = _target_prices(open0, free, on, set())
    for h in hosts:
        own = on[h.id]
        if not own or h.draining or not h.ready:
            continue
        if busy_min0 > h.price / max(h.slots, 1) + 1e-9 and idle_min0 >= _leaving(h, own, by_id):
            continue
        if any(not t.movable or t.remaining is None for t in own):
            continue
        need = sum(t.slots for t in own)  # a gang's slots on its other instances too: it moves whole
        # cheap bounds first: the others' free slots must hold its trials and leave keep_free_slots
        own_free, own_slots = (0, 0) if h.id in cordoned else (h.free, h.slots)
        if pool_free0 - own_free < need or pool_free0 - own_slots < policy.keep_free_slots:
            continue
        later = [w for w in map(waiting_for, own) if w is not None]
        if later:
            plan.next_check_at = min([*later, *([plan.next_check_at] if plan.next_check_at else [])])
            continue
        used = sum(n for t in own for hid, n in t.placements if hid == h.id)
        candidates.append((used, -h.price, h.id))
    pool_free: int | None = None  # the pool's free slots and its targets' prices: again after each move
    busy_min = idle_min = math.inf  # set with pool_free, before their first use
    # each host's own tasks keep it until the longest ends: moving onto it costs only beyond that
    kept_until = {h.id: max((t.remaining or 0.0 for t in on[h.id]), default=0.0) for h in hosts} if candidates else {}
    for _, _, host_id in sorted(candidates):
        if budget <= 0:
            break
        source = by_id[host_id]
        own = on[host_id]
        if len(own) > budget or any(any(hid in emptied for hid, _ in t.placements) for t in own):
            continue
        if pool_free is None:
            open_hosts = [h for h in hosts if h.ready and not h.draining and h.id not in emptied | cordoned]
            pool_free = sum(free[h.id] for h in open_hosts)
            busy_min, idle_min = _target_prices(open_hosts, free, on, busy_targets)
        if pool_free - (0 if host_id in cordoned else source.slots) < policy.keep_free_slots:
            continue
        # nowhere to go at a lower price per slot, and no idle instance cheaper than what would leave
        if busy_min > source.price / max(source.slots, 1) + 1e-9 and idle_min >= _leaving(source, own, by_id):
            continue
        undo = dict(free)
        placed = _place_all(own, source, hosts, free, emptied | cordoned | {host_id} | _gang_hosts(own), policy)
        if placed is None:
            continue
        # a gang that leaves may empty its other instances too: they go with the source
        moved = {t.allocation_id for t in own}
        freed = [source] + [
            by_id[hid]
            for t in own
            for hid, _ in t.placements
            if hid != host_id and hid in by_id and all(o.allocation_id in moved for o in on[hid])
        ]
        saving, rate = _worth(freed, own, placed, by_id, kept_until, policy)
        if saving <= 0 or rate < policy.min_saving_per_hour:
            free.update(undo)
            continue
        for task, targets in placed:
            for hid in targets:
                busy_targets.add(hid)
            plan.moves.append(
                Move(
                    task.allocation_id,
                    tuple(h for h, _ in task.placements),
                    tuple(targets),
                    round(rate, 4),
                    round(saving, 2),
                    f"moved from instance {host_id} to {', '.join(targets)} to save ${rate:.2f}/h",
                )
            )
        for task, targets in placed:
            for hid in targets:
                kept_until[hid] = max(kept_until[hid], (task.remaining or 0.0) + policy.restore_cost)
        budget -= len(own)
        pool_free = None
        for host in freed:
            if host.id not in emptied:
                emptied.add(host.id)
                plan.drain.append((host.id, f"its trial(s) fit elsewhere: saves ${rate:.2f}/h"))
    if spot_offers and max_new_instances > 0 and budget > 0:
        _ask_for_spot(
            now, policy, hosts, on, emptied | busy_targets, spot_offers, max_new_instances, budget, plan, waiting_for
        )
    return plan


def _leaving(source: HostView, own: list[TaskView], by_id: dict[str, HostView]) -> float:
    """USD/h that leaves with the source's trials: the source, and the other instances of its gangs."""
    total = source.price
    for t in own:
        if len(t.placements) > 1:  # most trials run on one instance: nothing else leaves with them
            total += sum(by_id[hid].price for hid, _ in t.placements if hid != source.id and hid in by_id)
    return total


def _target_prices(
    open_hosts: list[HostView], free: dict[str, int], on: dict[str, list[TaskView]], busy: set[str]
) -> tuple[float, float]:
    """(the lowest price per slot of an instance with room and work of its own, the lowest price of
    an idle one): a move goes to the one at no higher price per slot, or empties onto the other."""
    busy_min = idle_min = math.inf
    for h in open_hosts:
        if free[h.id] <= 0:
            continue
        if on[h.id] or h.id in busy:
            busy_min = min(busy_min, h.price / max(h.slots, 1))
            if free[h.id] == h.slots:  # wholly free yet busy (zero-slot work): a gang's target at any price
                idle_min = 0.0
        else:
            idle_min = min(idle_min, h.price)
    return busy_min, idle_min


def _place_all(
    own: list[TaskView],
    source: HostView,
    hosts: Sequence[HostView],
    free: dict[str, int],
    excluded: set[str],
    policy: MovePolicy,
) -> list[tuple[TaskView, list[str]]] | None:
    """Where each of the source's trials goes (largest first; a gang whole), or None if one does not
    fit. Commits the free slots it takes only when all fit."""
    trial = dict(free)
    # a gang's slots on its other hosts come free when it leaves
    for task in own:
        for hid, n in task.placements:
            if hid != source.id and hid in trial:
                trial[hid] += n
    targets = [h for h in hosts if h.ready and not h.draining and h.id not in excluded]
    out: list[tuple[TaskView, list[str]]] = []
    for task in sorted(own, key=lambda t: (-t.slots, t.allocation_id)):
        chosen = _fit(task.slots, targets, trial, source)
        if chosen is None:
            return None
        out.append((task, chosen))
    free.update(trial)
    return out


def _fit(need: int, targets: list[HostView], free: dict[str, int], source: HostView) -> list[str] | None:
    """One host with room (spot first, then the fullest, then the cheapest per slot), else the fewest
    wholly free hosts whose slots add up to the need exactly (a gang)."""
    best = None
    for h in targets:
        room = free[h.id]
        if room >= need and need > 0 and h.price / max(h.slots, 1) <= source.price / max(source.slots, 1) + 1e-9:
            key = (not h.spot, room - need, h.price / max(h.slots, 1), h.id)
            if best is None or key < best[0]:
                best = (key, h.id)
    if best is not None:
        free[best[1]] -= need
        return [best[1]]
    whole = sorted(
        (h for h in targets if free[h.id] == h.slots and h.slots > 0), key=lambda h: (-h.slots, not h.spot, h.id)
    )
    chosen, total = [], 0
    for h in whole:
        if total + h.slots <= need:
            chosen.append(h.id)
            total += h.slots
        if total == need:
            for hid in chosen:
                free[hid] = 0
            return chosen
    return None


def _gang_hosts(own: list[TaskView]) -> set[str]:
    return {hid for t in own if len(t.placements) > 1 for hid, _ in t.placements}


def _worth(
    freed: list[HostView],
    own: list[TaskView],
    placed: list[tuple[TaskView, list[str]]],
    hosts: dict[str, HostView],
    kept_until: dict[str, float],
    policy: MovePolicy,
) -> tuple[float, float]:
    """(USD saved over the trials' remaining time, costs deducted; USD/h spent less while they run).
    `freed`: the instances the moves empty (the source, and the others of a gang left with nothing)."""
    horizon = max(t.remaining or 0.0 for t in own)
    price = sum(h.price for h in freed)
    saved = price * horizon / HOUR
    cost = price * policy.checkpoint_cost / HOUR  # they run on while the trials checkpoint
    extra_rate = 0.0
    extension: dict[str, float] = {}
    for task, targets in placed:
        for hid in targets:
            end = (task.remaining or 0.0) + policy.checkpoint_cost + policy.restore_cost
            extension[hid] = max(extension.get(hid, 0.0), end)
    for hid, end in extension.items():
        host = hosts[hid]
        longer = max(end - kept_until[hid], 0.0)
        cost += host.price * longer / HOUR
        if kept_until[hid] <= 0.0:  # it had nothing to do: it is paid for them now
            extra_rate += host.price
    return saved - cost, price - extra_rate


def _ask_for_spot(
    now: float,
    policy: MovePolicy,
    hosts: Sequence[HostView],
    on: dict[str, list[TaskView]],
    skip: set[str],
    offers: Sequence[SpotOffer],
    max_new: int,
    budget: int,
    plan: MovePlan,
    waiting_for: Callable[[TaskView], float | None],
) -> None:
    """Spot first: an on-demand instance whose trials are all movable asks for a spot replacement
    (the cheapest spot type that holds them on one instance) when that pays for its boot and the move.
    The replacement starts empty; once it is ready, the next plan moves the trials onto it."""
    launches: dict[str, int] = {}
    by_id = {h.id: h for h in hosts}
    # spot instances still booting, empty: replacements asked for earlier, counted before asking again
    coming = {h.id: h.free for h in hosts if h.spot and not h.ready and not h.draining and not on[h.id]}
    for h in sorted(
        (h for h in hosts if not h.spot and h.ready and not h.draining and h.id not in skip),
        key=lambda h: (-h.price, h.id),
    ):
        own = on[h.id]
        if not own or len(own) > budget or sum(launches.values()) >= max_new:
            continue
        if any(not t.movable or t.remaining is None for t in own):
            continue
        later = [w for w in map(waiting_for, own) if w is not None]
        if later:  # look again when they can move
            plan.next_check_at = min([*later, *([plan.next_check_at] if plan.next_check_at else [])])
            continue
        need = sum(t.slots for t in own)  # a gang's slots on other instances too: it moves whole
        booting = next((hid for hid, room in coming.items() if room >= need), None)
        if booting is not None:
            coming[booting] -= need
            continue
        if sum(coming.values()) >= need and any(len(t.placements) > 1 for t in own):
            for hid in list(coming):  # a gang takes wholly free instances
                coming[hid] = 0
            continue
        # one instance that holds them, or whole instances of one type for a single gang
        shapes = [(o, 1) for o in offers if o.slots >= need]
        if len(own) == 1:
            shapes += [(o, need // o.slots) for o in offers if 0 < o.slots < need and need % o.slots == 0]
        shapes = [(o, k) for o, k in shapes if sum(launches.values()) + k <= max_new]
        if not shapes:
            continue
        offer, count = min(shapes, key=lambda ok: (ok[0].price * ok[1], ok[1]))
        horizon = max(t.remaining or 0.0 for t in own)
        # the trials run on here while the replacement boots, then checkpoint and leave
        left = horizon - policy.boot_time
        # what leaves: this instance, and a gang's other instances when the gang is all they hold
        leaving = h.price + sum(
            by_id[hid].price
            for t in own
            for hid, _ in t.placements
            if hid != h.id and hid in by_id and all(o in own for o in on[hid])
        )
        new_price = offer.price * count
        cost = (
            leaving * (policy.boot_time + policy.checkpoint_cost)
            + new_price * (policy.boot_time + left + policy.checkpoint_cost + policy.restore_cost)
        ) / HOUR
        saving = leaving * horizon / HOUR - cost
        rate = leaving - new_price
        if saving <= 0 or rate < policy.min_saving_per_hour:
            continue
        launches[offer.instance_type] = launches.get(offer.instance_type, 0) + count
        budget -= len(own)
        plan.launch.append(
            (
                offer.instance_type,
                count,
                f"a spot replacement for on-demand instance {h.id}: saves ${rate:.2f}/h once its trial(s) move",
            )
        )
