"""The scheduler: pure, snapshot in, assignments out. Priority order (lower number first), FIFO
within a priority, best (or worst) fit over agents (spot agents first), and a task gets all of its
slots or none; a task that runs in a container goes only to agents that run containers. The fit
itself is fit.SlotBins, which the scaling decider uses too.
`plan` adds the pool's policy: preemption of less urgent tasks, or max-min fair share across
groups (experiments) by weight, and each group's max_slots: the slots its running and newly placed
tasks hold together never exceed it (running tasks are never stopped for it; new ones wait). A zero-slot
task goes only on an agent that runs fewer than the cap of them (ZeroSlotCaps; Determined caps them at 100
per agent); when every agent is at it, the task waits."""

from __future__ import annotations

import heapq
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Literal

from pedl.scheduling.fit import Fitting, SlotBins


@dataclass(frozen=True)
class AgentSnapshot:
    id: str
    slot_ids: tuple[str, ...]
    free_slot_ids: tuple[str, ...]
    runs_containers: bool = True  # the agent runs tasks that name an image (it has Docker)
    spot: bool = False  # a spot instance's agent: placement fills it before on-demand agents
    zero_slot_tasks: int = 0  # allocations of no slots it runs


@dataclass(frozen=True)
class SlotRequest:
    allocation_id: str
    slots_needed: int
    priority: int
    queued_at: float
    group: str = ""  # the experiment, for fair share and max_slots
    weight: float = 1.0
    max_slots: int | None = None  # the group's cap on the slots it holds at once (None: no cap)
    # the job's place in its pool's queue among equal priorities (`det job update --ahead-of`): the
    # experiment's queue position, else its submission time; None: the request's own queued_at
    position: float | None = None
    needs_containers: bool = False  # its experiment names an image: only agents with Docker take it


@dataclass(frozen=True)
class RunningTask:
    allocation_id: str
    priority: int
    placements: tuple[tuple[str, tuple[str, ...]], ...]
    started_at: float
    group: str = ""
    preempting: bool = False  # already asked to checkpoint and leave
    preemptible: bool = True  # False: a command, notebook, shell or TensorBoard (it cannot checkpoint and come back)

    @property
    def slots(self) -> int:
        return sum(len(slot_ids) for _, slot_ids in self.placements)


@dataclass
class SchedulePlan:
    assignments: list[Assignment] = field(default_factory=list)
    preempt: list[str] = field(default_factory=list)  # running allocations to preempt
    # unplaced requests held back by their group's max_slots: allocation id -> (max_slots, slots the
    # group holds with this plan's placements)
    capped: dict[str, tuple[int, int]] = field(default_factory=dict)
    zero_capped: list[str] = field(default_factory=list)  # zero-slot requests every agent's cap held back


@dataclass
class Assignment:
    allocation_id: str
    placements: list[tuple[str, list[str]]] = field(default_factory=list)  # (agent_id, slot_ids)


def queue_key(r: SlotRequest) -> tuple[int, float, float, str]:
    """The queue's order: priority, then the job's position, then FIFO."""
    return r.priority, r.queued_at if r.position is None else r.position, r.queued_at, r.allocation_id


def order_requests(requests: list[SlotRequest]) -> list[SlotRequest]:
    return sorted(requests, key=queue_key)


class GroupCaps:
    """Each group's max_slots (as its requests carry it) and the slots it holds: its running tasks'
    at first, growing as the pass places its requests."""

    def __init__(self, requests: list[SlotRequest], running: list[RunningTask]) -> None:
        self.limit = {r.group: r.max_slots for r in requests if r.max_slots is not None}
        self.held: dict[str, int] = defaultdict(int)
        for task in running:
            if task.group in self.limit:
                self.held[task.group] += task.slots

    def allows(self, req: SlotRequest) -> bool:
        limit = self.limit.get(req.group)
        return limit is None or req.slots_needed == 0 or self.held[req.group] + req.slots_needed <= limit

    def take(self, req: SlotRequest) -> None:
        if req.group in self.limit:
            self.held[req.group] += req.slots_needed

    def capped(self, unplaced: list[SlotRequest]) -> dict[str, tuple[int, int]]:
        return {r.allocation_id: (self.limit[r.group], self.held[r.group]) for r in unplaced if not self.allows(r)}


class ZeroSlotCaps:
    """The zero-slot allocations each agent runs, growing as the pass places more, against the cap of them per
    agent (limits.max_zero_slot_tasks_per_agent); `refused`: the zero-slot requests no agent under it took."""

    def __init__(self, limit: int, agents: list[AgentSnapshot]) -> None:
        self.limit = limit
        self.count = {a.id: a.zero_slot_tasks for a in agents}
        self.refused: list[str] = []

    def allows(self, agent_id: str) -> bool:
        return self.count[agent_id] < self.limit

    def take(self, agent_id: str) -> None:
        self.count[agent_id] += 1


def schedule(
    requests: list[SlotRequest],
    agents: list[AgentSnapshot],
    fitting: Fitting = "best",
    *,
    ordered: bool = False,
    caps: GroupCaps | None = None,
    zero_caps: ZeroSlotCaps | None = None,
) -> list[Assignment]:
    """Place as many requests as fit, in priority/FIFO order; a request that does not fit now
    is skipped, and later (smaller) ones may still be placed. With `caps`, a request its group's
    max_slots does not allow is skipped too (and `caps` counts what is placed); with `zero_caps`, a
    zero-slot request goes only on an agent under its cap. Spot agents are filled before on-demand ones
    (see fit.SlotBins)."""
    bins: SlotBins[str] = SlotBins()
    free_ids: dict[str, list[str]] = {}
    for a in agents:
        bins.add(a.id, len(a.slot_ids), len(a.free_slot_ids), preferred=a.spot, capable=a.runs_containers)
        free_ids[a.id] = list(a.free_slot_ids)
    out: list[Assignment] = []
    queue = list(requests) if ordered else order_requests(requests)
    zero_left = sum(1 for r in queue if r.slots_needed == 0)
    for req in queue:
        if req.slots_needed == 0:
            zero_left -= 1
            # zero-slot tasks go on the agent with the fewest free slots (keeps GPUs for GPU work)
            agent_id = bins.fullest(
                capable_only=req.needs_containers, usable=zero_caps.allows if zero_caps is not None else None
            )
            if agent_id is not None:
                out.append(Assignment(req.allocation_id, [(agent_id, [])]))
                if zero_caps is not None:
                    zero_caps.take(agent_id)
            elif zero_caps is not None and bins.fullest(capable_only=req.needs_containers) is not None:
                zero_caps.refused.append(req.allocation_id)
            continue
        if caps is not None and not caps.allows(req):
            continue
        if bins.free_total == 0:
            if zero_left == 0:
                break  # nothing else can be placed
            continue  # zero-slot requests further down the queue still fit
        placed = bins.place(req.slots_needed, fitting, capable_only=req.needs_containers)
        if placed is None:
            continue
        assignment = Assignment(req.allocation_id)
        for agent_id, n in placed:
            ids = free_ids[agent_id]
            assignment.placements.append((agent_id, ids[:n]))
            free_ids[agent_id] = ids[n:]
        out.append(assignment)
        if caps is not None:
            caps.take(req)
    return out


def fair_order(requests: list[SlotRequest], running: list[RunningTask]) -> list[SlotRequest]:
    """Max-min fair order: repeatedly the earliest request of the group whose usage per weight is
    lowest, counting each request as if it were placed (progressive filling)."""
    usage: dict[str, float] = defaultdict(float)
    for task in running:
        usage[task.group] += task.slots
    queues: dict[str, list[SlotRequest]] = defaultdict(list)
    for req in order_requests(requests):
        queues[req.group].append(req)
    heap = [(usage[g] / q[0].weight, q[0].priority, q[0].queued_at, g) for g, q in queues.items()]
    heapq.heapify(heap)
    out: list[SlotRequest] = []
    pos = dict.fromkeys(queues, 0)
    while heap:
        _, _, _, group = heapq.heappop(heap)
        req = queues[group][pos[group]]
        out.append(req)
        pos[group] += 1
        usage[group] += max(req.slots_needed, 1)
        if pos[group] < len(queues[group]):
            nxt = queues[group][pos[group]]
            heapq.heappush(heap, (usage[group] / nxt.weight, nxt.priority, nxt.queued_at, group))
    return out


def plan(
    requests: list[SlotRequest],
    agents: list[AgentSnapshot],
    running: list[RunningTask],
    *,
    scheduler: Literal["priority", "fair_share"] = "priority",
    fitting: Fitting = "best",
    preemption: bool = False,
    max_zero_slot_per_agent: int | None = None,
) -> SchedulePlan:
    ordered = fair_order(requests, running) if scheduler == "fair_share" else order_requests(requests)
    caps = GroupCaps(requests, running)
    zero_caps = ZeroSlotCaps(max_zero_slot_per_agent, agents) if max_zero_slot_per_agent is not None else None
    assignments = schedule(ordered, agents, fitting, ordered=True, caps=caps, zero_caps=zero_caps)
    placed = {a.allocation_id for a in assignments}
    result = SchedulePlan(
        assignments,
        capped=caps.capped([r for r in ordered if r.allocation_id not in placed]),
        zero_capped=zero_caps.refused if zero_caps is not None else [],
    )
    if scheduler != "priority" or not preemption or any(t.preempting for t in running):
        return result  # one round of preemption at a time: wait for the victims to leave
    free: dict[str, int] = {a.id: len(a.free_slot_ids) for a in agents}
    for a in assignments:
        for agent_id, slot_ids in a.placements:
            free[agent_id] -= len(slot_ids)
    taken: set[str] = set()
    for req in ordered:
        if req.allocation_id in placed or req.slots_needed == 0 or req.allocation_id in result.capped:
            continue  # a request its max_slots holds back preempts nothing: it could not take the slots
        eligible = None if not req.needs_containers else {a.id for a in agents if a.runs_containers}
        victims = _victims(req, free, running, taken, eligible)
        if victims:
            result.preempt += victims
            taken.update(victims)
    return result


def _victims(
    req: SlotRequest,
    free: dict[str, int],
    running: list[RunningTask],
    taken: set[str],
    eligible: set[str] | None = None,
) -> list[str]:
    """The fewest least-urgent tasks on one agent (of `eligible`, None: any) whose slots, with the free
    ones, fit the request."""
    by_agent: dict[str, list[RunningTask]] = defaultdict(list)
    for task in running:
        if (
            task.preemptible
            and task.priority > req.priority
            and task.allocation_id not in taken
            and len(task.placements) == 1
            and (eligible is None or task.placements[0][0] in eligible)
        ):
            by_agent[task.placements[0][0]].append(task)
    best: list[RunningTask] | None = None
    for agent_id, tasks in by_agent.items():
        room = free.get(agent_id, 0)
        chosen = []
        # least urgent first, then the most recently started (it loses the least work)
        for task in sorted(tasks, key=lambda t: (-t.priority, -t.started_at)):
            if room >= req.slots_needed:
                break
            chosen.append(task)
            room += task.slots
        if room >= req.slots_needed and (best is None or len(chosen) < len(best)):
            best = chosen
    return [t.allocation_id for t in best] if best else []
