"""The replay's moves (pedl only): consolidation and spot-first moves, and yields to new work, planned
by the provisioner's own planners (consolidation.py, yielding.py) and carried out on the simulated pool."""

from __future__ import annotations

from collections.abc import Callable

from pedl.scheduling.consolidation import MovePlan, MovePolicy, SpotOffer, TaskView, plan_moves
from pedl.scheduling.pool_policy import PoolPolicy
from pedl.scheduling.yielding import WaitingTask, plan_yields
from pedl.sim.cloud import CloudSettings, InstanceState, SimInstance
from pedl.sim.jobs import SimJob


class ReplayMoves:
    """Replay's moving half: what it reads and calls of the replay is declared here."""

    moves_policy: MovePolicy | None
    policy: PoolPolicy
    settings: CloudSettings
    instances: dict[str, SimInstance]
    running: dict[str, SimInstance]
    pending: dict[str, SimJob]
    _all_jobs: dict[str, SimJob]
    _blocked: dict[tuple[str, bool], float]
    recent_moves: list[float]
    yields: int
    _dirty: bool
    _moves_dirty: bool
    _terminate: Callable[[SimInstance, float, str], None]
    _launch: Callable[[str, bool, float], None]
    _wake: Callable[[float, float], None]
    start_move: Callable[[SimJob, float], None]

    def _consolidate(self, now: float) -> None:
        """The move planner over the pool as the provisioner would see it, carried out: moving jobs
        checkpoint (MOVED after checkpoint_cost), their instances drain and go once empty, and spot
        replacements are launched. Only while nothing waits: queued work comes first."""
        self._moves_dirty = False
        policy = self.moves_policy
        assert policy is not None
        for inst in [i for i in self.instances.values() if (i.draining or i.cordoned) and not i.jobs]:
            self._terminate(inst, now, "drained: its trials moved or ended")
        room = any(i.free and not (i.draining or i.cordoned) for i in self.running.values())
        if self.pending or not (room or (self.policy.spot and any(not i.spot for i in self.instances.values()))):
            return  # no trial could move anywhere, and no on-demand instance to replace with spot
        hosts, tasks = [], []
        seen: set[str] = set()
        for inst in self.instances.values():
            if inst.state not in (InstanceState.RUNNING, InstanceState.STARTING, InstanceState.REQUESTED):
                continue
            hosts.append(inst.host_view())
            for job_id in inst.jobs:
                if job_id in seen:
                    continue
                seen.add(job_id)
                job = self._all_jobs[job_id]
                ran = job.trained(now)
                checkpointed = job.progress > 0 or (0 < self.settings.checkpoint_period <= ran)
                tasks.append(
                    TaskView(
                        job_id,
                        tuple((i.id, len(slots)) for i, slots in job.placements),
                        checkpointed and not job.moving,
                        job.trace.run_time - job.progress - ran,
                        job.run_started,
                    )
                )
        offers = []
        if self.policy.spot:
            offers = [
                SpotOffer(o.name, o.slots, o.price * self.settings.spot_price_fraction)
                for o in self.policy.types
                if (o.name, True) not in self._blocked
            ]
        alive = len([i for i in self.instances.values() if i.state != InstanceState.INTERRUPTED])
        if not (offers or any(t.movable for t in tasks) or any(i.cordoned for i in self.instances.values())):
            return  # no trial can move yet, and no cordon to set or lift
        plan = plan_moves(
            now,
            policy,
            hosts,
            tasks,
            recent_moves=self.recent_moves,
            spot_offers=offers,
            max_new_instances=max(self.policy.max_instances - alive, 0),
        )
        self._carry_out(plan, now)

    def _yield(self, now: float) -> None:
        """Long checkpointed trials give their slots to new work that waits for a boot (yielding.py)."""
        policy = self.moves_policy
        assert policy is not None
        if not any(i.state == InstanceState.STARTING for i in self.instances.values()):
            return
        hosts = [
            i.host_view() for i in self.instances.values() if i.state in (InstanceState.RUNNING, InstanceState.STARTING)
        ]
        tasks, leaving = [], {}
        for inst in self.running.values():
            if inst.draining or inst.cordoned:
                continue
            for job_id in inst.jobs:
                job = self._all_jobs[job_id]
                if job.moving:
                    leaving[inst.id] = leaving.get(inst.id, 0) + job.trace.slots
                    continue
                if len(job.placements) != 1:
                    continue
                ran = job.trained(now)
                checkpointed = job.progress > 0 or (0 < self.settings.checkpoint_period <= ran)
                tasks.append(
                    TaskView(
                        job_id,
                        ((inst.id, job.trace.slots),),
                        checkpointed,
                        job.trace.run_time - job.progress - ran,
                        job.run_started,
                    )
                )
        waiting = [WaitingTask(j.id, j.trace.slots, j.started_at is None) for j in self.pending.values()]
        for move in plan_yields(now, policy, hosts, tasks, waiting, recent_moves=self.recent_moves, leaving=leaving):
            job = self._all_jobs[move.allocation_id]
            job.yielding = True
            self.yields += 1
            self.start_move(job, now)

    def _carry_out(self, plan: MovePlan, now: float) -> None:
        cordon = {inst_id for inst_id, _ in plan.cordon}
        for inst in self.instances.values():
            if inst.cordoned != (inst.id in cordon):
                inst.cordoned = inst.id in cordon
                inst.invalidate()
                self._dirty = True  # capacity changed for the scheduler
        for inst_id, _reason in plan.drain:
            inst = self.instances[inst_id]
            inst.draining = True
            inst.invalidate()
        for move in plan.moves:
            self.start_move(self._all_jobs[move.allocation_id], now)
        self.recent_moves = [t for t in self.recent_moves if now - t < 3600.0]
        for instance_type, count, _reason in plan.launch:
            for _ in range(count):
                self._launch(instance_type, True, now)
        if plan.next_check_at is not None:
            self._wake(now, plan.next_check_at)
