"""What the scaling decider sees of one pool, computed from plain facts and `now`: the provisioner loads
the facts from the database, the simulator builds them from its simulated instances; both call `snapshot`."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass

from pedl.scheduling.scaling_decider import InstanceView, LiveState, PendingTask


@dataclass(frozen=True)
class InstanceFacts:
    """One live instance as the provisioner's records have it."""

    id: str
    instance_type: str
    state: LiveState  # the master's REQUESTED, STARTING, RUNNING or TERMINATING, as the decider names it
    launched_at: float
    slots: int  # its agent's slots once it registered, else the launch's
    spot: bool = False
    interrupted: bool = False  # a spot interruption notice arrived
    # it takes no new work (spot first: on-demand while spot capacity is there); its trials stay on it
    cordoned: bool = False
    agent_connected: bool = True  # its agent is registered and connected now
    agent_disconnected_at: float | None = None  # when its agent was seen to go, if recorded


@dataclass(frozen=True)
class HeldTask:
    """An allocation that holds slots (assigned or running), and where."""

    allocation_id: str
    slots_needed: int
    queued_at: float
    placements: tuple[tuple[str, int], ...] = ()  # (agent id, slots held there); 0 for a zero-slot task


def snapshot(
    now: float,
    instances: Iterable[InstanceFacts],
    held: Collection[HeldTask],
    waiting: Iterable[PendingTask],
    idle_since: dict[str, float],
) -> tuple[list[InstanceView], list[PendingTask]]:
    """The decider's instance views and waiting tasks.

    `idle_since` (instance id -> since when) is updated in place: set the first time an instance is
    seen running with nothing held on it, dropped once it is busy or not running. Idleness counts from
    the first snapshot that sees it, the first moment the provisioner can know it. The provisioner
    fills the dict from its instance rows and writes the changes back (so a master restart keeps every
    idle clock); the simulator keeps one dict for the whole replay.

    An instance's view depends only on its facts, the held tasks placed on it, its `idle_since` entry
    and `now`, so a snapshot of some instances (with the held tasks on them) gives them the views a
    snapshot of all would: the simulator takes it again only of the instances that changed.
    """
    used: dict[str, int] = {}  # agent id -> slots held there; any entry makes it busy (zero-slot tasks too)
    for task in held:
        for agent_id, count in task.placements:
            used[agent_id] = used.get(agent_id, 0) + count
    views: list[InstanceView] = []
    interrupted: set[str] = set()
    for facts in instances:
        state = facts.state
        running = state == "running"
        held_slots = used.get(facts.id)
        idle: float | None = None
        if running and held_slots is None:
            idle = idle_since.setdefault(facts.id, now)
        else:
            idle_since.pop(facts.id, None)
        disconnected = None
        if running and not facts.agent_connected:
            disconnected = facts.agent_disconnected_at if facts.agent_disconnected_at is not None else now
        if facts.interrupted:
            interrupted.add(facts.id)
        # positional, in InstanceView's field order: a third cheaper, and a replay builds thousands
        views.append(
            InstanceView(
                facts.id,
                facts.instance_type,
                state,
                facts.launched_at,
                facts.slots,
                facts.spot,
                0 if facts.cordoned else max(facts.slots - (held_slots or 0), 0),
                held_slots is not None,
                idle,
                disconnected,
                facts.interrupted,
            )
        )
    pending = list(waiting)
    # work on an instance the cloud is about to reclaim needs a new home now, not after it
    # checkpoints and leaves: count it as waiting, so the replacement boots meanwhile
    if interrupted:
        pending += [
            PendingTask(t.allocation_id, t.slots_needed, t.queued_at)
            for t in held
            if any(agent_id in interrupted for agent_id, _ in t.placements)
        ]
    return views, pending
