"""The discrete-event replay: trace jobs arrive, the production scheduler places them and the
production scaling decider, fed by the provisioner's own snapshot code, launches and terminates
simulated instances, all on virtual time.

Time only jumps from event to event (arrival, spot fulfilment, boot, finish, interruption, reclaim,
decider wake-up), so 149 days of trace cost what their events cost, not 149 days of 5 s ticks.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import replace

from pedl.scheduling.pool_policy import Policy
from pedl.scheduling.scaling_decider import InstanceView, PendingTask, decide
from pedl.scheduling.scheduler import AgentSnapshot, SlotRequest, schedule
from pedl.scheduling.snapshot import HeldTask, snapshot
from pedl.sim.cloud import CloudSettings, InstanceState, SimInstance, SimulatedCloud, saved_progress
from pedl.sim.figures import policy_result
from pedl.sim.jobs import JobState, SimJob
from pedl.sim.pool import DETERMINED_TICK, SimPool
from pedl.sim.replay_moves import ReplayMoves
from pedl.sim.results import PolicyResult
from pedl.sim.trace import TraceJob

PRIORITY = 42  # every trace job at the scheduler's default priority: FIFO

# event kinds, in the order a batch at one instant handles them
ARRIVE, FULFIL, BOOTED, FINISH, INTERRUPT, RECLAIM, MOVED, WAKE = range(8)


class Replay(ReplayMoves):
    """One policy over one trace. `run()` returns the figures; the replay is not reusable."""

    def __init__(
        self, jobs: list[TraceJob], pool: SimPool, settings: CloudSettings, policy: Policy, lower_bound_hours: float
    ) -> None:
        self.pool = pool
        self.kind = policy
        self.policy = pool.policy(policy)
        self.tick = DETERMINED_TICK if policy == "determined" else 0.0
        self.settings = settings
        self.cloud = SimulatedCloud(settings, self.policy.types)
        self.trace_jobs = jobs
        self.lower_bound_hours = lower_bound_hours
        self._heap: list[tuple[float, int, int, object]] = []
        self._seq = itertools.count()
        self.instances: dict[str, SimInstance] = {}  # every instance not terminated, in launch order
        self.running: dict[str, SimInstance] = {}  # registered agents that take work
        self.gone: list[SimInstance] = []
        self._all_jobs: dict[str, SimJob] = {}
        self.pending: dict[str, SimJob] = {}  # in queue order
        self.idle_since: dict[str, float] = {}  # kept by snapshot(), as the provisioner's is
        self._zero_pending = 0
        self._dirty = False  # pending work or free capacity changed since the last scheduling pass
        self._wakes: set[float] = set()
        self._blocked: dict[tuple[str, bool], float] = {}  # (type, spot) -> avoided until
        self.queue_delays: list[float] = []
        self.launches = self.spot_launches = self.spot_cancelled = 0
        self.never_fit = self.finished = self.interruptions = self.requeued = self.decisions = 0
        self.lost_gpu_seconds = self.used_gpu_seconds = 0.0
        self._billed_now = self.peak_instances = 0
        # consolidation and spot first (pedl only): the move planner on every change, and at its wake-ups
        # (expecting the cloud's median boot, as the live provisioner expects its provider's)
        self.moves_policy = (
            replace(pool.moves, boot_time=settings.boot_delay) if policy == "pedl" and pool.moves.enabled else None
        )
        self.recent_moves: list[float] = []
        self.moves = self.yields = 0
        self.yield_wait_gpu_seconds = 0.0
        self._fresh_waiting = 0  # queued jobs that never ran: new work that a long trial may yield to
        self.moving_gpu_seconds = 0.0
        self._moves_dirty = False
        self.big_job_types: dict[str, int] = {}  # instance types the 8-GPU (and larger) jobs started on
        # pedl's agents watch for the spot notice, and their trials checkpoint and leave (one that outlasts
        # the notice saves nothing); Determined's lose what they ran since their last periodic checkpoint
        cost = pool.moves.checkpoint_cost
        self.notice_checkpoint = cost if policy == "pedl" and cost < settings.interruption_notice else None

    # -- the loop ------------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, payload: object = None) -> None:
        heapq.heappush(self._heap, (t, kind, next(self._seq), payload))

    def run(self) -> PolicyResult:
        started = time.perf_counter()
        for job in self.trace_jobs:
            self._push(job.arrival, ARRIVE, job)
        handlers = {
            ARRIVE: self._on_arrive,
            FULFIL: self._on_fulfil,
            BOOTED: self._on_booted,
            FINISH: self._on_finish,
            INTERRUPT: self._on_interrupt,
            RECLAIM: self._on_reclaim,
            MOVED: self._on_moved,
            WAKE: self._on_wake,
        }
        heap = self._heap
        now = 0.0
        while heap:
            now = heap[0][0]
            while heap and heap[0][0] == now:
                _, kind, _, payload = heapq.heappop(heap)
                handlers[kind](now, payload)
            self._step(now)
            if self._settled():
                break
        return policy_result(self, now, time.perf_counter() - started)

    def _settled(self) -> bool:
        """Every job finished or dropped, and the pool down to what min_instances keeps, idle: the
        replay ends here (spot replacements of kept instances would otherwise go on forever)."""
        return (
            len(self.instances) <= self.policy.min_instances
            and self.finished + self.never_fit == len(self.trace_jobs)
            and all(i.state == InstanceState.RUNNING and not i.jobs for i in self.instances.values())
        )

    def _step(self, now: float) -> None:
        """After every batch of events at one instant: schedule, then decide (pedl at once,
        Determined-style on its next 5 s tick)."""
        if self._dirty:
            self._dirty = False
            if self.pending:
                self._schedule(now)
        if self.tick:
            tick = math.ceil(now / self.tick - 1e-9) * self.tick
            if tick > now + 1e-9:
                self._wake(now, tick)
                return
        self._decide(now)
        if self._dirty and self.pending:  # a termination put jobs back in the queue
            self._dirty = False
            self._schedule(now)
        if self.moves_policy is not None and self._fresh_waiting:
            self._yield(now)
        if self.moves_policy is not None and self._moves_dirty:
            self._consolidate(now)

    def _wake(self, now: float, t: float) -> None:
        if not math.isfinite(t) or t <= now:
            return
        if self.tick:
            t = math.ceil(t / self.tick - 1e-9) * self.tick
        if t not in self._wakes:
            self._wakes.add(t)
            self._push(t, WAKE)

    # -- events --------------------------------------------------------------------------------------

    def _on_arrive(self, now: float, trace_job: object) -> None:
        assert isinstance(trace_job, TraceJob)
        job = SimJob(trace_job)
        self._all_jobs[job.id] = job
        self._enqueue(job, now)

    def _on_fulfil(self, now: float, inst: object) -> None:
        assert isinstance(inst, SimInstance)
        if inst.state == InstanceState.REQUESTED:  # else cancelled meanwhile
            self._fulfil(inst, now, "spot request fulfilled after a capacity shortage")

    def _on_booted(self, now: float, inst: object) -> None:
        assert isinstance(inst, SimInstance)
        if inst.state != InstanceState.STARTING:
            return  # terminated or reclaimed while booting
        inst.set_state(now, InstanceState.RUNNING, "agent registered")
        inst.ready_at = now
        self.running[inst.id] = inst
        self._dirty = self._moves_dirty = True

    def _on_finish(self, now: float, payload: object) -> None:
        assert isinstance(payload, tuple)  # (job, its run_seq when the event was pushed)
        job, seq = payload
        if job.state != JobState.RUNNING or job.run_seq != seq:
            return  # a run cut short; its job was queued again
        self._release(job, now)
        job.set_state(JobState.DONE)
        self.finished += 1

    def _on_interrupt(self, now: float, inst: object) -> None:
        assert isinstance(inst, SimInstance)
        if inst.state == InstanceState.STARTING:
            self.interruptions += 1
            self._terminate(inst, now, "spot interruption while booting")
        elif inst.state == InstanceState.RUNNING:
            self.interruptions += 1
            inst.set_state(now, InstanceState.INTERRUPTED, "spot interruption notice")
            del self.running[inst.id]
            for job_id in list(inst.jobs):
                self._requeue(self._all_jobs[job_id], now, notice=self.notice_checkpoint)
            self._push(now + self.settings.interruption_notice, RECLAIM, inst)

    def _on_reclaim(self, now: float, inst: object) -> None:
        assert isinstance(inst, SimInstance)
        if inst.state == InstanceState.INTERRUPTED:
            self._terminate(inst, now, "reclaimed after the spot notice")

    def _on_wake(self, now: float, _: object) -> None:
        self._wakes.discard(now)
        self._moves_dirty = True

    def _on_moved(self, now: float, payload: object) -> None:
        """A moving job's checkpoint is written: it leaves its instances and queues again, its whole
        run kept (the checkpoint was taken when the move began)."""
        assert isinstance(payload, tuple)  # (job, its run_seq when the event was pushed)
        job, seq = payload
        if job.state != JobState.RUNNING or job.run_seq != seq or not job.moving:
            return  # it finished or was cut short meanwhile
        job.moving, moves = False, self.pool.moves
        job.progress += job.trained(now - moves.checkpoint_cost)
        job.restore_debt = moves.restore_cost
        self.moving_gpu_seconds += job.trace.slots * moves.checkpoint_cost
        self._release(job, now)
        job.set_state(JobState.PENDING)
        if job.yielding:
            job.yielding, job.yielded_at = False, now
        self._enqueue(job, now)

    # -- jobs ----------------------------------------------------------------------------------------

    def _enqueue(self, job: SimJob, now: float) -> None:
        slots = job.trace.slots
        job.request = SlotRequest(job.id, slots, PRIORITY, now)
        job.task = PendingTask(job.id, slots, now)
        self.pending[job.id] = job
        if slots == 0:
            self._zero_pending += 1
        elif job.started_at is None:
            self._fresh_waiting += 1
        self._dirty = True

    def _unqueue(self, job: SimJob) -> None:
        del self.pending[job.id]
        if job.trace.slots == 0:
            self._zero_pending -= 1
        elif job.started_at is None:
            self._fresh_waiting -= 1

    def _schedule(self, now: float) -> None:
        zero = self._zero_pending > 0
        agents = [
            AgentSnapshot(i.id, i.slot_ids, tuple(i.free), spot=i.spot)
            for i in self.running.values()
            if (zero or i.free) and not i.draining and not i.cordoned
        ]
        if not agents:
            return
        # every pending job has its request and task, made as it was queued (_enqueue)
        requests = [job.request for job in self.pending.values() if job.request is not None]
        for assignment in schedule(requests, agents, self.pool.scaling.fitting):
            self._start(self.pending[assignment.allocation_id], assignment.placements, now)

    def _start(self, job: SimJob, placements: list[tuple[str, list[str]]], now: float) -> None:
        self._unqueue(job)
        job.set_state(JobState.RUNNING)
        job.run_started = now
        job.run_seq += 1
        if job.started_at is None:
            job.started_at = now
            self.queue_delays.append(now - job.trace.arrival)
        if job.yielded_at is not None:
            self.yield_wait_gpu_seconds += job.trace.slots * (now - job.yielded_at)
            job.yielded_at = None
        assert job.task is not None
        held = HeldTask(
            job.id,
            job.task.slots_needed,
            job.task.queued_at,
            tuple([(agent_id, len(slot_ids)) for agent_id, slot_ids in placements]),
        )
        for agent_id, slot_ids in placements:
            inst = self.running[agent_id]
            if slot_ids:
                taken = set(slot_ids)
                inst.free = [s for s in inst.free if s not in taken]
            if not inst.jobs:
                inst.busy_since = now
            inst.jobs[job.id] = held
            inst.changed()
            job.placements.append((inst, list(slot_ids)))
        if job.trace.slots >= 8:
            for inst, _ in job.placements:
                self.big_job_types[inst.instance_type] = self.big_job_types.get(inst.instance_type, 0) + 1
        restore, job.restore_debt = job.restore_debt, 0.0
        job.trained_from = now + restore
        self.moving_gpu_seconds += job.trace.slots * restore
        self._push(now + job.trace.run_time - job.progress + restore, FINISH, (job, job.run_seq))

    def _release(self, job: SimJob, now: float) -> None:
        self.used_gpu_seconds += job.trace.slots * (now - job.run_started)
        self._moves_dirty = True
        for inst, slot_ids in job.placements:
            inst.free.extend(slot_ids)
            del inst.jobs[job.id]
            if not inst.jobs and inst.busy_since is not None:
                inst.busy_seconds += now - inst.busy_since
                inst.busy_since = None
            inst.changed()
        job.placements = []
        self._dirty = True

    def _requeue(self, job: SimJob, now: float, notice: float | None = None) -> None:
        """Cut a run short and queue it again: with `notice` (a checkpoint's time) it keeps its whole run."""
        ran = job.trained(now)
        saved = ran if notice is not None else saved_progress(ran, self.settings.checkpoint_period)
        if notice is not None:
            job.restore_debt = self.pool.moves.restore_cost
            self.moving_gpu_seconds += job.trace.slots * notice
        job.moving = job.yielding = False
        job.progress += saved
        self.lost_gpu_seconds += job.trace.slots * (ran - saved)
        self._release(job, now)
        job.set_state(JobState.PENDING)
        self.requeued += 1
        self._enqueue(job, now)

    # -- instances -----------------------------------------------------------------------------------

    def _launch(self, instance_type: str, spot: bool, now: float) -> None:
        inst = self.cloud.new_instance(instance_type, spot, now)
        inst.state = InstanceState.REQUESTED
        inst.history.append((now, InstanceState.REQUESTED, "spot request" if spot else "launch"))
        self.instances[inst.id] = inst
        self.launches += 1
        if spot:
            self.spot_launches += 1
            wait = self.cloud.spot_capacity_wait()
            if wait is not None:
                self._push(now + wait, FULFIL, inst)
                return
        self._fulfil(inst, now, "launched")

    def _fulfil(self, inst: SimInstance, now: float, reason: str) -> None:
        inst.set_state(now, InstanceState.STARTING, reason)
        inst.launched_at = now
        self._push(now + self.cloud.boot_delay(), BOOTED, inst)
        if inst.spot:
            after = self.cloud.time_to_interruption()
            if after is not None:
                self._push(now + after, INTERRUPT, inst)
        self._billed_now += 1
        self.peak_instances = max(self.peak_instances, self._billed_now)

    def _terminate(self, inst: SimInstance, now: float, reason: str) -> None:
        for job_id in list(inst.jobs):
            self._requeue(self._all_jobs[job_id], now)
        if inst.state == InstanceState.REQUESTED:
            self.spot_cancelled += 1
        else:
            self._billed_now -= 1
        inst.set_state(now, InstanceState.TERMINATED, reason)
        inst.terminated_at = now
        del self.instances[inst.id]
        self.running.pop(inst.id, None)
        self.idle_since.pop(inst.id, None)
        self.gone.append(inst)

    def start_move(self, job: SimJob, now: float) -> None:
        """The job checkpoints to move or yield: MOVED ends it after the policy's checkpoint cost."""
        assert self.moves_policy is not None
        job.moving = True
        self.moves += 1
        self.recent_moves.append(now)
        self._push(now + self.moves_policy.checkpoint_cost, MOVED, (job, job.run_seq))

    # -- deciding ------------------------------------------------------------------------------------

    def _decide(self, now: float) -> None:
        """One decision, carried out; then a second look if it launched or terminated anything, as
        the provisioner's next pass would, so that deadlines of the new instances (spot request
        timeout, starting period) get their wake-ups."""
        if self._decide_once(now):
            self._decide_once(now)

    def _decide_once(self, now: float) -> bool:
        self.decisions += 1
        for pair in [p for p, until in self._blocked.items() if until <= now]:
            del self._blocked[pair]
        views, pending = self._snapshot(now)
        d = decide(now, self.policy, views, pending, unavailable=set(self._blocked) or None)
        for pair in d.unavailable:
            until = now + self.settings.unavailable_period
            self._blocked[pair] = until
            self._wake(now, until)
        for inst_id, reason in d.terminate:
            inst = self.instances.get(inst_id)
            if inst is not None:
                self._terminate(inst, now, reason)
        for alloc_id, _reason in d.never_fit:
            job = self.pending.get(alloc_id)
            if job is not None:
                self._unqueue(job)
                job.set_state(JobState.NEVER_FIT)
                self.never_fit += 1
        for launch in d.launch:
            for _ in range(launch.count):
                self._launch(launch.instance_type, launch.spot, now)
        if d.next_check_at is not None:
            self._wake(now, d.next_check_at)
        return bool(d.launch or d.terminate)

    def _snapshot(self, now: float) -> tuple[list[InstanceView], list[PendingTask]]:
        """The provisioner's snapshot, taken again only of the instances that changed since the last
        one (with the jobs on them); the others' views stand, since nothing in a view moves with time
        alone but a disconnected agent's, and simulated agents stay connected. An interrupted instance
        holds no job here (its jobs are queued again at the notice), so no work moves to pending."""
        stale = [i for i in self.instances.values() if i.view is None]
        held: dict[str, HeldTask] = {}
        for inst in stale:
            held.update(inst.jobs)  # a gang job once
        views, _ = snapshot(now, [i.facts() for i in stale], held.values(), (), self.idle_since)
        for inst, view in zip(stale, views, strict=True):
            inst.view = view
        pending = [job.task for job in self.pending.values() if job.task is not None]
        if any(i.draining for i in self.instances.values()):
            # the jobs of a draining instance still hold it while they checkpoint: to the decider they
            # are work that needs a home (as the full snapshot has them, in the order it has them)
            seen: set[str] = set()
            for inst in self.instances.values():
                for job_id, task in inst.jobs.items():
                    if job_id not in seen:
                        seen.add(job_id)
                        if any(i.draining for i, _ in self._all_jobs[job_id].placements):
                            pending.append(PendingTask(task.allocation_id, task.slots_needed, task.queued_at))
        return [i.view for i in self.instances.values() if i.view is not None], pending  # each has one now
