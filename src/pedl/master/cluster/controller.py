"""The cluster controller: agents, allocations and scheduling. Every change to who runs where goes
through here, under one lock, in short transactions; messages to agents go out after commit.

Experiment progression (what a trial's exit means, the searcher) lives in services/experiment_flow.py
and is called from here with the same session."""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common import agent_protocol as proto
from pedl.master.cluster.rendezvous import node_envs, pick_port
from pedl.master.cluster.scheduler import AgentSnapshot, RunningTask, SchedulePlan, SlotRequest
from pedl.master.cluster.scheduler import plan as schedule_plan
from pedl.master.db import models
from pedl.master.lifecycle import HELD, AgentState, AllocationState, InstanceState
from pedl.master.services import experiment_flow, logs
from pedl.master.services.transitions import (
    record_event,
    set_agent_state,
    set_allocation_state,
    set_instance_state,
)
from pedl.master.services.users import token_hash

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

A = AllocationState

# exit reasons that are not the task's fault: the trial is queued again without counting a restart
NOT_STARTED = "start was not delivered to the agent"
SCHEDULE_BATCH = 250


class Controller:
    def __init__(self, ctx: MasterContext) -> None:
        self.ctx = ctx
        self.lock = threading.RLock()
        self._outbox: list[tuple[str, BaseModel]] = []
        self._revoked: list[str] = []  # allocations whose task tokens die when this transaction commits
        # {experiment id: (live trials, capacity)} where a top-up created nothing (adaptive_asha at its
        # brackets' concurrency): experiment_flow.top_up skips them until one of the two changes
        self.saturated_experiments: dict[int, tuple[int, int]] = {}
        self._preempt: set[str] = set()
        self._wake: Callable[[], None] = lambda: None
        self._wake_provisioners: Callable[[], None] = lambda: None
        self._want_checkpoint_gc: Callable[[int], None] = lambda _experiment_id: None
        self.provisioners: dict = {}  # pool name -> PoolProvisioner

    # -- plumbing --------------------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.ctx.clock.now()

    def set_waker(self, wake: Callable[[], None]) -> None:
        self._wake = wake

    def wake(self) -> None:
        self._wake()

    def set_provisioner_waker(self, wake: Callable[[], None]) -> None:
        self._wake_provisioners = wake

    def wake_provisioners(self) -> None:
        self._wake_provisioners()

    def set_checkpoint_gc(self, want: Callable[[int], None]) -> None:
        self._want_checkpoint_gc = want

    def want_checkpoint_gc(self, experiment_id: int) -> None:
        """Ask for checkpoint garbage collection of an experiment (a trial or the experiment ended).
        Cheap: a worker does it after this transaction, outside the lock (services/checkpoint_gc.py)."""
        self._want_checkpoint_gc(experiment_id)

    def queue_message(self, agent_id: str, msg: BaseModel) -> None:
        self._outbox.append((agent_id, msg))

    def _flush(self) -> None:
        revoked, self._revoked = self._revoked, []
        for allocation_id in revoked:  # again after the commit: a lookup during it may have cached the token
            self.ctx.caller_cache.drop_allocation(allocation_id)
        out, self._outbox = self._outbox, []
        for agent_id, msg in out:
            if not self.ctx.hub.send(agent_id, msg):
                log.info("agent %s is not connected; %s not sent", agent_id, msg.type)

    def run(self, fn: Callable[[Session], object]) -> object:
        """Run fn in one transaction under the lock, then deliver queued agent messages."""
        with self.lock:
            try:
                with self.ctx.db.session() as s:
                    result = fn(s)
            except BaseException:
                self._outbox.clear()
                self._revoked.clear()
                raise
            self._flush()
        return result

    def should_preempt(self, allocation_id: str) -> bool:
        return allocation_id in self._preempt

    # -- start-up ------------------------------------------------------------------------------

    def startup(self) -> None:
        """After a (re)start: every agent must reconnect within agent_reconnect_wait to keep its
        tasks; preemption requests still in force are reloaded."""

        def fn(s: Session) -> None:
            now = self.now
            for agent in s.scalars(select(models.Agent).where(models.Agent.state == AgentState.CONNECTED)):
                set_agent_state(s, now, agent, AgentState.DISCONNECTED,
                                "master restarted; waiting for the agent to reconnect")
                agent.disconnected_at = now
            for alloc in s.scalars(select(models.Allocation).where(
                    models.Allocation.state.in_(HELD), models.Allocation.preempt_requested.is_(True))):
                self._preempt.add(alloc.id)

        self.run(fn)

    # -- agents --------------------------------------------------------------------------------

    def agent_registered(self, reg: proto.Register, remote_host: str) -> proto.Registered:
        def fn(s: Session) -> proto.Registered:
            now = self.now
            agent = s.get(models.Agent, reg.agent_id)
            slots = [sl.model_dump() for sl in reg.slots]
            if agent is None:
                agent = models.Agent(id=reg.agent_id, hostname=reg.hostname, address=reg.address or remote_host,
                                     resource_pool=reg.resource_pool, slots=slots, state=AgentState.CONNECTED,
                                     version=reg.version, registered_at=now, last_heartbeat=now)
                s.add(agent)
                record_event(s, now, "agent", reg.agent_id,
                             f"registered from {remote_host} with {len(slots)} slot(s) in pool {reg.resource_pool}",
                             to_state=AgentState.CONNECTED)
            else:
                set_agent_state(s, now, agent, AgentState.CONNECTED, f"reconnected from {remote_host}")
                agent.hostname, agent.address, agent.slots = reg.hostname, reg.address or remote_host, slots
                agent.resource_pool, agent.version = reg.resource_pool, reg.version
                agent.last_heartbeat, agent.disconnected_at = now, None
            instance = s.get(models.Instance, reg.agent_id)
            if instance is not None and instance.state == InstanceState.STARTING:
                set_instance_state(s, now, instance, InstanceState.RUNNING, f"agent registered from {remote_host}")
                instance.registered_at = now
            kill = self._reconcile(s, reg.agent_id, set(reg.running_allocations))
            return proto.Registered(agent_id=reg.agent_id, heartbeat_interval=self.ctx.config.agent_heartbeat_interval,
                                    kill_unknown=kill)

        result = self.run(fn)
        self.wake()
        return result  # type: ignore[return-value]

    def _reconcile(self, s: Session, agent_id: str, running: set[str]) -> list[str]:
        """Match what the agent says it runs with what the database says it should run."""
        kill = []
        for alloc_id in running:
            alloc = s.get(models.Allocation, alloc_id)
            if alloc is None or alloc.state not in HELD or agent_id not in _agents_of(alloc):
                kill.append(alloc_id)
            elif alloc.kill_requested:
                self.queue_message(agent_id, proto.KillTask(allocation_id=alloc_id,
                                                            grace_period=self.ctx.config.task_kill_grace_period,
                                                            reason="killed while the agent was away"))
        for alloc in self._held_on(s, agent_id):
            if alloc.id in running:
                continue
            if alloc.state == A.ASSIGNED:
                self._allocation_ended(s, alloc, None, NOT_STARTED)
            else:
                self._allocation_ended(s, alloc, None,
                                       f"the task was no longer running on agent {agent_id} when it reconnected")
        return kill

    def _held_on(self, s: Session, agent_id: str) -> list[models.Allocation]:
        rows = s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD)))
        return [a for a in rows if agent_id in _agents_of(a)]

    def agent_disconnected(self, agent_id: str, reason: str) -> None:
        def fn(s: Session) -> None:
            agent = s.get(models.Agent, agent_id)
            if agent is not None and agent.state == AgentState.CONNECTED:
                set_agent_state(s, self.now, agent, AgentState.DISCONNECTED, reason, level="warning")
                agent.disconnected_at = self.now

        self.run(fn)

    def spot_interruption(self, agent_id: str, action: str, when: str) -> None:
        """The cloud will reclaim this instance: stop placing work on it, ask its tasks to
        checkpoint and leave (they queue again, not counted as failures), and replace it at once."""

        def fn(s: Session) -> None:
            now = self.now
            agent = s.get(models.Agent, agent_id)
            if agent is not None:
                agent.draining = True
            instance = s.get(models.Instance, agent_id)
            if instance is not None and instance.interrupted_at is None:
                instance.interrupted_at = now
            record_event(s, now, "agent", agent_id, f"spot interruption notice ({action} at {when or 'soon'})",
                         level="warning")
            for alloc in self._held_on(s, agent_id):
                self.preempt_allocation(s, alloc, "spot interruption")

        self.run(fn)
        self.wake_provisioners()

    # -- task reports --------------------------------------------------------------------------

    def task_started(self, agent_id: str, allocation_id: str) -> None:
        def fn(s: Session) -> None:
            alloc = s.get(models.Allocation, allocation_id)
            if alloc is None or alloc.state != A.ASSIGNED:
                return
            set_allocation_state(s, self.now, alloc, A.RUNNING, f"process started on agent {agent_id}")
            alloc.started_at = self.now
            experiment_flow.trial_started(s, self.now, alloc)

        self.run(fn)

    def task_exited(self, agent_id: str, allocation_id: str, exit_code: int | None, reason: str) -> None:
        def fn(s: Session) -> None:
            alloc = s.get(models.Allocation, allocation_id)
            if alloc is None or alloc.state == A.TERMINATED:
                return
            if agent_id not in _agents_of(alloc):
                log.warning("agent %s reported exit of %s, which is not assigned to it", agent_id, allocation_id)
                return
            self._placement_exited(s, alloc, agent_id, exit_code, reason)

        self.run(fn)
        self.wake()

    def _placement_exited(self, s: Session, alloc: models.Allocation, agent_id: str, exit_code: int | None,
                          reason: str) -> None:
        """One agent's process of an allocation ended. A distributed allocation ends when all of its
        processes have; the first failure stops the others (they cannot go on without it)."""
        places = [dict(p) for p in alloc.assignment or []]
        if len(places) <= 1:
            self._allocation_ended(s, alloc, exit_code, reason)
            return
        order = sum(1 for p in places if p.get("exited"))
        for p in places:
            if p["agent_id"] == agent_id and not p.get("exited"):
                p.update(exited=True, exit_code=exit_code, reason=reason, order=order)
        alloc.assignment = places  # a new list: JSON columns track assignment, not mutation
        if exit_code != 0 and not alloc.kill_requested:
            self.kill_allocation(s, alloc, f"rank on agent {agent_id} ended ({exit_code}); stopping the others",
                                 keep_failure=True)
        if all(p.get("exited") for p in places):
            failures = sorted((p for p in places if p.get("exit_code") != 0), key=lambda p: p["order"])
            failed = failures[0] if failures else None  # the first to fail is the cause
            if failed is None:
                self._allocation_ended(s, alloc, 0, "")
            else:
                rank = places.index(failed)
                self._allocation_ended(s, alloc, failed.get("exit_code"),
                                       f"rank {rank} on agent {failed['agent_id']}"
                                       + (f": {failed['reason']}" if failed.get("reason") else ""))

    def _allocation_ended(self, s: Session, alloc: models.Allocation, exit_code: int | None, reason: str) -> None:
        now = self.now
        if exit_code == 0:
            why = "exited with code 0"
        elif exit_code is None:
            why = reason or "ended before its process ran"
        else:
            why = f"exited with code {exit_code}" + (f": {reason}" if reason else "")
        for agent_id in _agents_of(alloc, running_only=True):  # ranks still running elsewhere
            if len(alloc.assignment or []) > 1:
                self.queue_message(agent_id, proto.KillTask(allocation_id=alloc.id, reason=why,
                                                            grace_period=self.ctx.config.task_kill_grace_period))
        set_allocation_state(s, now, alloc, A.TERMINATED, why)
        alloc.ended_at, alloc.exit_code, alloc.exit_reason = now, exit_code, why
        self._preempt.discard(alloc.id)
        self.ctx.caller_cache.drop_allocation(alloc.id)  # its session token dies with it
        self._revoked.append(alloc.id)
        if exit_code != 0 and not alloc.kill_requested:
            logs.add_master_line(s, now, alloc, f"allocation {alloc.id} {why}", level="LOG_LEVEL_ERROR")
        experiment_flow.allocation_ended(self, s, alloc, exit_code, why, counts_as_failure=reason != NOT_STARTED)

    def kill_allocation(self, s: Session, alloc: models.Allocation, reason: str, *,
                        keep_failure: bool = False) -> None:
        """End an allocation: drop it if not yet running, else signal its agents. `keep_failure`
        stops the other ranks of a failed distributed allocation without calling it a kill."""
        if alloc.state == A.PENDING:
            set_allocation_state(s, self.now, alloc, A.TERMINATED, reason)
            alloc.ended_at, alloc.exit_reason = self.now, reason
            return
        if alloc.state == A.TERMINATED:
            return
        if not keep_failure:
            alloc.kill_requested = True
        if alloc.state != A.TERMINATING:
            set_allocation_state(s, self.now, alloc, A.TERMINATING, reason)
        for agent_id in _agents_of(alloc, running_only=True):
            self.queue_message(agent_id, proto.KillTask(allocation_id=alloc.id, reason=reason,
                                                        grace_period=self.ctx.config.task_kill_grace_period))

    def preempt_allocation(self, s: Session, alloc: models.Allocation, reason: str) -> None:
        """Ask a running task to checkpoint and exit; a pending one is simply dropped."""
        if alloc.state == A.PENDING:
            self.kill_allocation(s, alloc, reason)
            return
        if alloc.state in (A.ASSIGNED, A.RUNNING) and not alloc.preempt_requested:
            alloc.preempt_requested = True
            self._preempt.add(alloc.id)
            record_event(s, self.now, "allocation", alloc.id, f"preemption requested: {reason}")

    # -- the periodic pass ---------------------------------------------------------------------

    def tick(self) -> None:
        self.run(self._check_agents)
        self.run(lambda s: experiment_flow.top_up(self, s))  # trials for room that came since
        plan: list[tuple[str, list[tuple[str, list[str]]]]] = self.run(self._plan_schedule)  # type: ignore[assignment]
        # apply in short transactions, so API requests and agent reports interleave with a big pass
        for i in range(0, len(plan), SCHEDULE_BATCH):
            self.run(lambda s, chunk=plan[i:i + SCHEDULE_BATCH]: self._apply(s, chunk))

    def _check_agents(self, s: Session) -> None:
        now, cfg = self.now, self.ctx.config
        connected = self.ctx.hub.connected_ids()
        for agent in s.scalars(select(models.Agent).where(models.Agent.state != AgentState.GONE)):
            conn = self.ctx.hub.get(agent.id)
            if agent.state == AgentState.CONNECTED:
                silent = conn is None or now - conn.last_heartbeat > cfg.agent_heartbeat_timeout
                if silent:
                    reason = ("no heartbeat for " f"{cfg.agent_heartbeat_timeout:g}s") if conn else "connection lost"
                    set_agent_state(s, now, agent, AgentState.DISCONNECTED, reason, level="warning")
                    agent.disconnected_at = now
                    if conn is not None:
                        self.ctx.hub.close(agent.id)
                elif conn is not None:
                    agent.last_heartbeat = conn.last_heartbeat
            elif agent.state == AgentState.DISCONNECTED and agent.id not in connected:
                since = agent.disconnected_at or now
                if now - since >= cfg.agent_reconnect_wait:
                    set_agent_state(s, now, agent, AgentState.GONE,
                                    f"did not reconnect within {cfg.agent_reconnect_wait:g}s", level="warning")
                    for alloc in self._held_on(s, agent.id):
                        self._allocation_ended(s, alloc, None, f"agent {agent.id} was lost")

    def _plan_schedule(self, s: Session) -> list[tuple[str, list[tuple[str, list[str]]]]]:
        """Decide placements for every pool from one consistent snapshot (reads only)."""
        pending = list(s.scalars(select(models.Allocation).where(models.Allocation.state == A.PENDING)))
        if not pending:
            return []
        connected = self.ctx.hub.connected_ids()
        agents = [a for a in s.scalars(select(models.Agent).where(models.Agent.state == AgentState.CONNECTED))
                  if a.id in connected and a.enabled and not a.draining]
        held = list(s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))))
        used: dict[str, set[str]] = {}
        for alloc in held:
            for place in alloc.assignment or []:
                used.setdefault(place["agent_id"], set()).update(place["slot_ids"])
        groups = _experiment_groups(s, [a.trial_id for a in (*pending, *held) if a.trial_id])
        plan = []
        for pool in self.ctx.config.resource_pools:
            pool_agents = [
                AgentSnapshot(a.id, tuple(sl["id"] for sl in a.slots),
                              tuple(sl["id"] for sl in a.slots if sl["id"] not in used.get(a.id, set())))
                for a in agents if a.resource_pool == pool.pool_name]
            requests = [SlotRequest(a.id, a.slots_needed, a.priority, a.queued_at,
                                    *groups.get(a.trial_id, ("", 1.0)))
                        for a in pending if a.resource_pool == pool.pool_name]
            if not requests:
                continue
            running = [RunningTask(a.id, a.priority,
                                   tuple((p["agent_id"], tuple(p["slot_ids"])) for p in a.assignment or []),
                                   a.started_at or a.assigned_at or 0.0, groups.get(a.trial_id, ("", 1.0))[0],
                                   a.preempt_requested)
                       for a in held if a.resource_pool == pool.pool_name]
            sched = pool.scheduler
            result = schedule_plan(requests, pool_agents, running, scheduler=sched.type,
                                   fitting=sched.fitting_policy, preemption=sched.preemption) if pool_agents \
                else SchedulePlan()
            plan += [(a.allocation_id, a.placements) for a in result.assignments]
            for victim_id in result.preempt:
                victim = s.get(models.Allocation, victim_id)
                if victim is not None:
                    self.preempt_allocation(s, victim, "preempted for a more urgent trial")
            if len(result.assignments) < len(requests) and pool.provider is not None:
                self.wake_provisioners()
        return plan

    def _apply(self, s: Session, chunk: list[tuple[str, list[tuple[str, list[str]]]]]) -> None:
        """Assign a batch of planned placements, loading what the task specs need in a few queries."""
        with s.no_autoflush:
            allocs = {a.id: a for a in s.scalars(select(models.Allocation).where(
                models.Allocation.id.in_([aid for aid, _ in chunk])))}
            rows = experiment_flow.SpecRows.load(s, [a.trial_id for a in allocs.values() if a.trial_id])
            if any(len(placements) > 1 for _, placements in chunk):
                self._load_rendezvous(s, rows)
            for alloc_id, placements in chunk:
                alloc = allocs.get(alloc_id)
                if alloc is not None and alloc.state == A.PENDING:  # not killed since the plan
                    self._assign(s, alloc, placements, rows)

    def _assign(self, s: Session, alloc: models.Allocation, placements: list[tuple[str, list[str]]],
                rows: experiment_flow.SpecRows) -> None:
        now = self.now
        token = secrets.token_urlsafe(32)
        alloc.session_token_hash = token_hash(token)
        alloc.assignment = [{"agent_id": a, "slot_ids": slots} for a, slots in placements]
        alloc.assigned_at = now
        set_allocation_state(s, now, alloc, A.ASSIGNED,
                             "assigned to " + ", ".join(f"{a}{slots}" for a, slots in placements))
        spec = experiment_flow.task_spec(self, alloc, token, rows)
        ranks = self._rendezvous(alloc, placements, rows) if len(placements) > 1 else [{}]
        for (agent_id, slot_ids), rank_env in zip(placements, ranks, strict=True):
            conn = self.ctx.hub.get(agent_id)
            base = conn.master_url if conn else ""
            self.queue_message(agent_id, proto.StartTask(
                allocation_id=alloc.id, task_id=alloc.task_id, name=alloc.name, entrypoint=spec["entrypoint"],
                env={**spec["env"], **rank_env}, slot_ids=slot_ids, session_token=token,
                context_url=f"{base}/api/v1/tasks/{alloc.task_id}/context_directory"))

    def _load_rendezvous(self, s: Session, rows: experiment_flow.SpecRows) -> None:
        """Agent addresses and the rendezvous ports already taken, for distributed placements."""
        rows.agent_addresses = {a.id: a.address for a in s.scalars(select(models.Agent))}
        rows.ports_in_use = {}
        for held in s.scalars(select(models.Allocation).where(models.Allocation.state.in_(HELD))):
            places = held.assignment or []
            if places and places[0].get("port"):
                rows.ports_in_use.setdefault(places[0]["agent_id"], set()).add(places[0]["port"])

    def _rendezvous(self, alloc: models.Allocation, placements: list[tuple[str, list[str]]],
                    rows: experiment_flow.SpecRows) -> list[dict[str, str]]:
        """A rendezvous port on the chief agent, and each node's environment (see rendezvous.py)."""
        chief = placements[0][0]
        taken = rows.ports_in_use.setdefault(chief, set())
        port = pick_port(self.ctx.config.port_range(), taken, seed=alloc.id)
        if port is None:
            raise RuntimeError(f"no free rendezvous port on agent {chief} in {self.ctx.config.rendezvous_port_range}")
        taken.add(port)
        alloc.assignment = [{**p, "port": port} if i == 0 else p for i, p in enumerate(alloc.assignment)]
        return node_envs(placements, address=rows.agent_addresses.get(chief, "127.0.0.1"), port=port)


def _experiment_groups(s: Session, trial_ids: list[int]) -> dict[int, tuple[str, float]]:
    """trial id -> (experiment id as the fair-share group, the experiment's weight)."""
    if not trial_ids:
        return {}
    rows = s.execute(select(models.Trial.id, models.Experiment.id, models.Experiment.config)
                     .join(models.Experiment, models.Experiment.id == models.Trial.experiment_id)
                     .where(models.Trial.id.in_(set(trial_ids))))
    return {tid: (str(eid), float((cfg.get("resources") or {}).get("weight", 1.0))) for tid, eid, cfg in rows}


def _agents_of(alloc: models.Allocation, running_only: bool = False) -> list[str]:
    return [p["agent_id"] for p in alloc.assignment or [] if not (running_only and p.get("exited"))]
