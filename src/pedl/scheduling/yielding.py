"""Yielding to new work: pure, state in, moves out, time passed in. When new work waits for an
instance that is still booting, a long-running checkpointed trial of the same size gives it its
slots: the trial checkpoints and queues again, the new work starts in the seconds the checkpoint
takes, and the trial resumes on the booting instance, which was coming for that demand anyway.

This is least-attained-service scheduling (Tiresias, NSDI '19) applied at the one moment where it
costs nothing in instances: GPU jobs' run times are heavy-tailed, so a trial that has run for hours
will likely run for hours more, and a boot's wait is a small part of its run; a job that just arrived
is more often short, and the same wait can be most of it. The wait moves, it does not grow: the
booting instance is the one the scaling decider launched for the waiting demand, and the trial takes
that demand's place in it. Consolidation is what makes it matter: it removes the half-empty
instances where new work would otherwise start at once.

A yield is a move: it goes through the preemption path, counts against the pool's disruption budget
(`max_moves_per_hour`), and never takes a trial that has not checkpointed, opted out, runs as a gang
over several instances, is expected to end within `min_remaining_to_yield`, or started or moved less
than `min_runtime_between_moves` ago. Only work that has never run asks (a trial queued again after a
move or an interruption does not), so a trial never yields to a trial that yielded; and a trial yields
only to work at least as urgent (the scheduler's priority) as its own.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pedl.scheduling.consolidation import HostView, Move, MovePolicy, TaskView, moves_left


@dataclass(frozen=True)
class WaitingTask:
    """Work in the pool's queue, in queue order."""

    allocation_id: str
    slots: int
    first_start: bool  # it has nothing to resume from: new work (a trial queued again after a move is not)
    priority: int = 42


def plan_yields(
    now: float,
    policy: MovePolicy,
    hosts: Sequence[HostView],
    tasks: Sequence[TaskView],
    waiting: Sequence[WaitingTask],
    *,
    recent_moves: Sequence[float] = (),
    leaving: Mapping[str, int] | None = None,
) -> list[Move]:
    """The trials to move so that waiting new work starts now rather than after a boot.

    `hosts` are the pool's instances, booting ones with `ready=False`, their slots all free and
    their launch time (a boot about to end, sooner than a checkpoint, is no reason to yield);
    `leaving` counts, per ready instance, the slots that moves already under way will free (the
    waiting work first in the queue takes those). A waiting task takes a yield only when the
    booting capacity holds all the waiting work, so that each trial that yields has a place coming."""
    if not policy.enabled or not policy.yield_to_new_work:
        return []
    budget = moves_left(now, policy, recent_moves)
    if budget <= 0:
        return []
    leaving = leaving or {}
    # capacity coming: a boot expected to end sooner than a checkpoint would gives the work a place sooner
    booting = sum(
        h.free
        for h in hosts
        if not h.ready
        and not h.draining
        and (h.launched_at is None or h.launched_at + policy.boot_time - now > policy.checkpoint_cost)
    )
    demand = sum(w.slots for w in waiting)
    if booting <= 0 or booting < demand:
        return []
    # slots that come free on open instances once the moves under way end go to the first in the queue
    open_ids = {h.id for h in hosts if h.ready and not h.draining}
    soon = sum(n for host_id, n in leaving.items() if host_id in open_ids)
    by_size: dict[int, list[TaskView]] = {}
    for task in tasks:
        if (
            len(task.placements) == 1
            and task.placements[0][0] in open_ids
            and task.movable
            and task.remaining is not None
            and task.remaining >= policy.min_remaining_to_yield
            and now - task.since >= policy.min_runtime_between_moves
        ):
            by_size.setdefault(task.slots, []).append(task)
    for group in by_size.values():  # the longest still to run yields first: a boot is least of it
        group.sort(key=lambda t: (-(t.remaining or 0.0), t.allocation_id))
    moves: list[Move] = []
    for w in waiting:
        if soon >= w.slots:
            soon -= w.slots
            continue
        if not w.first_start or w.slots <= 0 or budget <= 0:
            continue
        candidates = by_size.get(w.slots) or []
        task = next((t for t in candidates if t.priority >= w.priority), None)
        if task is None:
            continue
        candidates.remove(task)
        host_id = task.placements[0][0]
        moves.append(
            Move(
                task.allocation_id,
                (host_id,),
                ("booting",),
                0.0,
                0.0,
                f"yielded its slots on instance {host_id} to new work ({w.allocation_id}); it resumes "
                f"on the instance booting for that work",
                yield_to=w.allocation_id,
            )
        )
        budget -= 1
    return moves
