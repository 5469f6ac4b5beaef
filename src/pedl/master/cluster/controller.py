"""The cluster controller: the lock-and-loop shell around the cluster's operations. Every change to
who runs where runs through `run`, in one short transaction under one lock; messages to agents go
out after the commit and are dropped on a rollback.

What the operations do lives in their own modules, which take the effects protocol
(lifecycle/effects.py) this class implements, never the Controller: cluster/agent_events.py (what
agents report), lifecycle/allocations.py (new, kill, preempt, ended), cluster/placement.py (the
scheduling pass) and lifecycle/progression.py (trials, the searcher, experiments).

The scheduling pass reads its snapshot and decides outside the lock (a read-only transaction, so
not holding SQLite's write lock either), and makes each batch of assignments ready there too (task
specs, tokens, messages); it takes the lock only to write a batch, checked against the rows as they
are then (each allocation still PENDING in its pool, each agent still usable). Passes run one at a
time (`_pass_lock`) and only a pass assigns slots, so slots a pass's snapshot saw free are still
free when it assigns them."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.clock import Clock
from pedl.common import agent_protocol as proto
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster import agent_events, assignment, placement
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.agent_resources import AgentResources
from pedl.master.cluster.known_agents import KnownAgents
from pedl.master.cluster.resource_manager import ResourceManager
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.lifecycle import progression
from pedl.master.lifecycle.states import HELD, AgentState
from pedl.master.lifecycle.task_specs import SpecCache
from pedl.master.lifecycle.transitions import set_agent_state
from pedl.master.observability.master_metrics import MasterMetrics

log = logging.getLogger(__name__)
T = TypeVar("T")

# placements (wait reasons) written per transaction: each holds the lock, and SQLite's write lock,
# for a few milliseconds, so API requests and agent reports interleave with a large pass. The
# placements' batches shrink (to a tenth at least) where writing one holds the lock longer than
# BATCH_LOCK_TARGET seconds (PostgreSQL writes a row in ~4 times SQLite's time), and grow back.
SCHEDULE_BATCH = 250
# placements made ready (task spec rows, tokens, messages) in one read transaction outside the lock,
# then written in batches as above: a read transaction and its queries cost PostgreSQL a few round
# trips whatever their size, and its write batches are small
PREPARE_BATCH = 1000
BATCH_LOCK_TARGET = 0.03
# Between two of its transactions the pass lets go of the GIL (os.sched_yield releases it; no clock is
# read or slept on). The lock is not fair: the pass thread, still running, took it again before a request
# woken by its release could run, and a request waited several batches under a large pass, 70-77 ms where
# a batch held the lock 21 ms at most (12-15 ms since)
hand_off = os.sched_yield
WAIT_BATCH = 500


def _next_batch(size: int, held: float) -> int:
    """The next batch's size, for the lock held `held` seconds by one of `size` placements."""
    wanted = size * BATCH_LOCK_TARGET / held if held > 0 else SCHEDULE_BATCH
    return max(max(SCHEDULE_BATCH // 10, 1), min(SCHEDULE_BATCH, round(wanted)))


class Controller:
    """Implements ClusterEffects (lifecycle/effects.py) for the operations it runs."""

    def __init__(
        self,
        *,
        config: MasterConfig,
        db: Database,
        clock: Clock,
        hub: AgentHub,
        caller_cache: CallerCache,
        cluster_id: str,
        metrics: MasterMetrics | None = None,
    ) -> None:
        self._config = config
        self.db = db
        self.clock = clock
        self.hub = hub
        self.caller_cache = caller_cache
        self._cluster_id = cluster_id
        self.metrics = metrics or MasterMetrics(process_metrics=False)  # pass durations, launches (provisioners)
        self._want_checkpoint_gc: Callable[[int], None] = lambda _experiment_id: None
        self.lock = threading.RLock()
        self._pass_lock = threading.Lock()  # one scheduling pass at a time
        # what the pass places allocations on: the agents (their rows kept from one pass to the next)
        self.resources: ResourceManager = AgentResources(hub, KnownAgents(db.changes))
        self._outbox: list[tuple[str, proto.MasterMessage]] = []
        self._revoked: list[str] = []  # allocations whose task tokens die when this transaction commits
        # {experiment id: (live trials, capacity)} where a top-up created nothing (experiment_progression.top_up)
        self.saturated_experiments: dict[int, tuple[int, int]] = {}
        self._preempt: set[str] = set()  # allocations whose preemption signal is up (as committed)
        self._preempt_changes: list[tuple[str, bool]] = []  # (allocation, up) applied when this transaction commits
        self._wake: Callable[[], object] = lambda: None
        self._wake_provisioners: Callable[[], object] = lambda: None

    # -- the effects protocol ----------------------------------------------------------------------

    @property
    def now(self) -> float:
        return self.clock.now()

    @property
    def config(self) -> MasterConfig:
        return self._config

    @property
    def cluster_id(self) -> str:
        return self._cluster_id

    def send(self, agent_id: str, msg: proto.MasterMessage) -> None:
        self._outbox.append((agent_id, msg))

    def wake(self) -> None:
        self._wake()

    def wake_provisioners(self) -> None:
        self._wake_provisioners()

    def want_checkpoint_gc(self, experiment_id: int) -> None:
        self._want_checkpoint_gc(experiment_id)

    def signal_preemption(self, allocation_id: str) -> None:
        self._preempt_changes.append((allocation_id, True))

    def allocation_closed(self, allocation_id: str) -> None:
        self._preempt_changes.append((allocation_id, False))
        self.caller_cache.drop_allocation(allocation_id)  # its session token dies with it
        self._revoked.append(allocation_id)

    # -- wiring what is built after the controller (master/wiring.py) or runs on the event loop ----

    def set_checkpoint_gc(self, want: Callable[[int], None]) -> None:
        self._want_checkpoint_gc = want

    def set_waker(self, wake: Callable[[], object]) -> None:
        self._wake = wake

    def set_provisioner_waker(self, wake: Callable[[], object]) -> None:
        self._wake_provisioners = wake

    # -- the lock and the transaction -------------------------------------------------------------

    def run(self, fn: Callable[[Session], T]) -> T:
        """Run fn in one transaction under the lock, then deliver queued agent messages."""
        with self.lock:
            try:
                with self.db.session() as s:
                    result = fn(s)
            except BaseException:  # the transaction rolled back: so do its effects
                self._outbox.clear()
                self._revoked.clear()
                self._preempt_changes.clear()
                raise
            self._flush()
        return result

    def _flush(self) -> None:
        changes, self._preempt_changes = self._preempt_changes, []
        for allocation_id, up in changes:  # the database now says the same (preempt_requested, TERMINATED)
            if up:
                self._preempt.add(allocation_id)
            else:
                self._preempt.discard(allocation_id)
        revoked, self._revoked = self._revoked, []
        for allocation_id in revoked:  # again after the commit: a lookup during it may have cached the token
            self.caller_cache.drop_allocation(allocation_id)
        out, self._outbox = self._outbox, []
        for agent_id, msg in out:
            if not self.resources.deliver(agent_id, msg):
                log.info("agent %s is not connected; %s not sent", agent_id, msg.type)

    def should_preempt(self, allocation_id: str) -> bool:
        return allocation_id in self._preempt

    # -- start-up ----------------------------------------------------------------------------------

    def startup(self) -> None:
        """After a (re)start: every agent must reconnect within agent_reconnect_wait to keep its
        tasks; preemption requests still in force are reloaded."""

        def fn(s: Session) -> None:
            now = self.now
            for agent in s.scalars(select(models.Agent).where(models.Agent.state == AgentState.CONNECTED)):
                set_agent_state(
                    s, now, agent, AgentState.DISCONNECTED, "master restarted; waiting for the agent to reconnect"
                )
                agent.disconnected_at = now
            for alloc in s.scalars(
                select(models.Allocation).where(
                    models.Allocation.state.in_(HELD), models.Allocation.preempt_requested.is_(True)
                )
            ):
                self._preempt.add(alloc.id)

        self.run(fn)

    # -- agent reports (from the agent websocket) ------------------------------------------------

    def agent_registered(self, reg: proto.Register, remote_host: str) -> proto.Registered:
        result = self.run(lambda s: agent_events.registered(self, s, reg, remote_host))
        self.wake()
        return result

    def agent_disconnected(self, agent_id: str, reason: str) -> None:
        self.run(lambda s: agent_events.disconnected(self, s, agent_id, reason))

    def spot_interruption(self, agent_id: str, action: str, when: str) -> None:
        self.run(lambda s: agent_events.spot_interruption(self, s, agent_id, action, when))
        self.wake_provisioners()

    def task_started(self, agent_id: str, allocation_id: str) -> None:
        self.run(lambda s: agent_events.task_started(self, s, agent_id, allocation_id))

    def task_exited(self, agent_id: str, allocation_id: str, exit_code: int | None, reason: str) -> None:
        self.run(lambda s: agent_events.task_exited(self, s, agent_id, allocation_id, exit_code, reason))
        self.wake()

    # -- the periodic pass -------------------------------------------------------------------------

    def tick(self) -> None:
        with self.metrics.timed(self.metrics.scheduling_pass):
            self._tick()

    def _tick(self) -> None:
        with self._pass_lock:
            try:
                self.run(self._check_agents)
            except BaseException:  # its heartbeats were not written after all
                self.resources.forget()
                raise
            self.run(self._top_up)  # trials for room that came since
            decided = self._plan_schedule()  # outside the lock
            if decided.preempt or decided.wake_provisioners:
                self.run(lambda s: placement.preempt(self, s, decided))
            cache = SpecCache()  # the experiments' parsed configs, from one batch to the next
            size = SCHEDULE_BATCH
            for i in range(0, len(decided.placements), PREPARE_BATCH):
                ready = self._prepare(decided, decided.placements[i : i + PREPARE_BATCH], cache)  # outside the lock
                while ready.assigned or ready.waits:
                    part = ready.take(size)
                    started = time.perf_counter()
                    self.run(lambda s, part=part: self._apply(s, part))
                    if len(part.assigned) == size:
                        size = _next_batch(size, time.perf_counter() - started)
                    hand_off()
            for i in range(0, len(decided.waits), WAIT_BATCH):
                self.run(
                    lambda s, chunk=decided.waits[i : i + WAIT_BATCH]: placement.record_waits(s, decided.now, chunk)
                )
                hand_off()

    # the pass's steps (methods, so benchmarks/scheduling_pass.py can time them)

    def _check_agents(self, s: Session) -> None:
        self.resources.check(self, s)

    def _top_up(self, s: Session) -> None:
        progression.top_up(self, s, self.saturated_experiments)

    def _plan_schedule(self) -> placement.PassPlan:
        """The snapshot, read without the lock, and the decision on it."""
        snap = self.resources.snapshot(self.db, self.config)
        return placement.decide(self.config, snap, self.now)

    def _prepare(
        self, decided: placement.PassPlan, chunk: list[placement.Placement], cache: SpecCache
    ) -> assignment.Prepared:
        """A batch's reads and work (tokens, task specs, messages), in a read-only transaction."""
        with self.db.read_session() as s:
            return self.resources.prepare(self, s, decided, chunk, cache)

    def _apply(self, s: Session, ready: assignment.Prepared) -> None:
        """Write a batch whose capacity may all still take work now."""
        self.resources.place(self, s, ready)
