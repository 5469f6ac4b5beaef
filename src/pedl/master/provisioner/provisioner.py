"""One pool's provisioner: reconcile the database with what the cloud reports (by tag), take a
snapshot, ask the pure scaling decider, record the intent, then make the cloud calls outside any
transaction. Launch errors back off exponentially with a cap and are shown on the pool and on the
experiments that wait. Its clocks and its memory of failures are stored (the instance rows, the pool's
pool_provisioning row), so a master restart neither resets an idle clock nor forgets a failure."""

from __future__ import annotations

import logging
import threading
import uuid
from typing import TYPE_CHECKING

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from pedl.config.master_config import ResourcePoolConfig
from pedl.master.cluster.wait_reasons import WaitKind
from pedl.master.db import models
from pedl.master.lifecycle import progression as experiment_progression
from pedl.master.lifecycle.checkpoint_gc_task_rows import KIND as GC_TASK_KIND
from pedl.master.lifecycle.states import HELD, LIVE_INSTANCE, AgentState, AllocationState, InstanceState
from pedl.master.lifecycle.transitions import record_event, set_instance_state
from pedl.master.observability.master_metrics import market
from pedl.master.provisioner import moves, pool_provisioning
from pedl.master.provisioner.pool_provisioning import PoolStatus
from pedl.master.provisioner.providers.base import (
    CloudError,
    CloudErrorKind,
    CloudInstance,
    CloudState,
    ForeignInstance,
    LaunchRequest,
    Provider,
)
from pedl.scheduling.consolidation import MovePlan
from pedl.scheduling.pool_policy import pool_policy
from pedl.scheduling.scaling_decider import Decision, InstanceView, LiveState, PendingTask, decide
from pedl.scheduling.snapshot import HeldTask, InstanceFacts, snapshot

if TYPE_CHECKING:
    from pedl.master.cluster.controller import Controller

log = logging.getLogger(__name__)
IS = InstanceState
# each live state as the scaling decider names it (scheduling/snapshot.py)
LIVE_STATE: dict[InstanceState, LiveState] = {
    IS.REQUESTED: "requested",
    IS.STARTING: "starting",
    IS.RUNNING: "running",
    IS.TERMINATING: "terminating",
}

TERMINATE_RETRY = 120.0


class PoolProvisioner:
    def __init__(self, ctl: Controller, pool: ResourcePoolConfig, provider: Provider) -> None:
        assert pool.provider is not None
        self.ctl, self.pool, self.cfg, self.provider = ctl, pool, pool.provider, provider
        # what a restart must not forget, loaded from the database (_load); the passes write it back
        self.status: PoolStatus
        self.unavailable: pool_provisioning.Unavailable  # (type, spot) -> avoided until
        self.idle_since: dict[str, float]  # instance id -> idle since: a copy of the rows', as of the last pass
        self.last_moves: MovePlan | None = None  # the move planner's last plan (None: it did not run)
        ctl.run(self._load)
        self._lock = threading.Lock()  # one step at a time per pool
        self.policy = pool_policy(self.cfg, pool.scheduler.fitting_policy)

    @property
    def now(self) -> float:
        return self.ctl.now

    def _load(self, s: Session) -> None:
        self.status, self.unavailable = pool_provisioning.load(s, self.pool.pool_name, self.now)
        self.idle_since = {
            inst_id: since
            for inst_id, since in s.execute(
                select(models.Instance.id, models.Instance.idle_since).where(
                    models.Instance.resource_pool == self.pool.pool_name,
                    models.Instance.state.in_(LIVE_INSTANCE),
                    models.Instance.idle_since.is_not(None),
                )
            )
            if since is not None
        }

    def _save_status(self, s: Session) -> None:
        pool_provisioning.save(s, self.pool.pool_name, self.status, self.unavailable)

    # -- one pass ------------------------------------------------------------------------------

    def step(self) -> float | None:
        """Run one provisioning pass; return when the decider wants to look again."""
        metrics = self.ctl.metrics
        with self._lock, metrics.timed(metrics.provisioner_pass.labels(pool=self.pool.pool_name)):
            try:
                cloud = self.provider.list_instances()
            except CloudError as exc:
                self._record_error(exc, "listing instances")
                return self.now + self._backoff_delay()
            decision = self.ctl.run(lambda s: self._plan(s, cloud))
            self._terminate(decision)
            self._launch(decision)
            self.status.last_decision_at = self.now
            wake = [t for t in (decision.next_check_at, self.status.backoff_until) if t is not None]
            return min(wake) if wake else None

    def _plan(self, s: Session, cloud: list[CloudInstance]) -> Decision:
        now = self.now
        self._sync(s, cloud)
        views, pending = self._snapshot(s)
        self.status.pending_slots = sum(p.slots_needed for p in pending)
        self.unavailable = {k: t for k, t in self.unavailable.items() if t > now}
        decision = decide(
            now,
            self.policy,
            views,
            pending,
            launch_blocked_until=self.status.backoff_until,
            unavailable=set(self.unavailable),
        )
        for key in decision.unavailable:
            self.unavailable[key] = now + self.cfg.capacity_retry_period
        # consolidation and spot first: drains, moves (preemptions), spot replacements, drained instances ended
        self.last_moves = moves.consolidate(
            self.ctl,
            s,
            self.pool.pool_name,
            self.cfg,
            decision,
            set(self.unavailable),
            self.ctl.hub.connected_ids(),
            scheduler=self.pool.scheduler.type,
        )
        if self.last_moves is not None and self.last_moves.next_check_at is not None:
            decision.wake_at(self.last_moves.next_check_at)  # when a trial becomes movable
        self._save_status(s)
        # a terminate the cloud did not act on (lost call, stopped instance, a master that stopped
        # between recording it and sending it) is sent again
        deciding = {i for i, _ in decision.terminate}
        for ci in cloud:
            if ci.id in deciding:
                continue
            row = s.get(models.Instance, ci.id)
            if (
                row is not None
                and row.state == IS.TERMINATING
                and row.terminate_sent_at is not None
                and now - row.terminate_sent_at > TERMINATE_RETRY
            ):
                decision.terminate.append((ci.id, "terminate sent again: the instance is still there"))
        for inst_id, reason in decision.terminate:
            row = s.get(models.Instance, inst_id)
            if row is not None and row.state != IS.TERMINATED:
                set_instance_state(s, now, row, IS.TERMINATING, reason)
                row.termination_reason = reason
                row.terminate_sent_at = now  # _terminate sends it right after this transaction
        for alloc_id, reason in decision.never_fit:
            alloc = s.get(models.Allocation, alloc_id)
            if alloc is not None and alloc.state == AllocationState.PENDING:
                experiment_progression.fail_unschedulable(self.ctl, s, alloc, f"pool {self.pool.pool_name}: {reason}")
        return decision

    def _sync(self, s: Session, cloud: list[CloudInstance]) -> None:
        """Adopt tagged instances the database does not know (a restart), follow spot requests to
        their instances, and close rows whose instances the cloud no longer reports."""
        now = self.now
        rows = {
            r.id: r
            for r in s.scalars(
                select(models.Instance).where(
                    models.Instance.resource_pool == self.pool.pool_name, models.Instance.state.in_(LIVE_INSTANCE)
                )
            )
        }
        seen: set[str] = set()
        for ci in cloud:
            seen.add(ci.id)
            row = rows.get(ci.id)
            if row is None and ci.spot_request_id:  # a fulfilled spot request: the row was the request
                req_row = rows.get(ci.spot_request_id)
                if req_row is not None and ci.id != ci.spot_request_id:
                    seen.add(req_row.id)
                    set_instance_state(s, now, req_row, IS.TERMINATED, f"fulfilled as {ci.id}")
                    req_row.terminated_at = now
            if row is None:
                row = models.Instance(
                    id=ci.id,
                    resource_pool=self.pool.pool_name,
                    provider=self.provider.name,
                    instance_type=ci.instance_type,
                    spot=ci.spot,
                    slots=self.cfg.slots_of(ci.instance_type),
                    price_per_hour=self._price(ci),
                    spot_request_id=ci.spot_request_id,
                    launched_at=ci.launched_at,
                    adopted=True,
                    state=IS.REQUESTED if ci.state == CloudState.REQUESTED else IS.STARTING,
                )
                s.add(row)
                rows[ci.id] = row
                record_event(
                    s,
                    now,
                    "instance",
                    ci.id,
                    f"found by tag in pool {self.pool.pool_name}; adopted",
                    to_state=row.state,
                )
                agent = s.get(models.Agent, ci.id)
                if agent is not None and agent.state == AgentState.CONNECTED:
                    set_instance_state(s, now, row, IS.RUNNING, "its agent is connected")
                    row.registered_at = now
            elif row.state == IS.REQUESTED and ci.state != CloudState.REQUESTED:
                set_instance_state(s, now, row, IS.STARTING, "spot request fulfilled")
            if ci.state == CloudState.TERMINATING and row.state != IS.TERMINATING:
                set_instance_state(s, now, row, IS.TERMINATING, "the cloud is terminating it")
        for row in rows.values():
            if row.id not in seen:
                set_instance_state(
                    s, now, row, IS.TERMINATED, row.termination_reason or "no longer reported by the provider"
                )
                row.terminated_at = now
                row.idle_since = None
                self.idle_since.pop(row.id, None)

    def _snapshot(self, s: Session) -> tuple[list[InstanceView], list[PendingTask]]:
        """Load the pool's live instances, their agents and its held and waiting allocations as plain
        facts; `snapshot` (shared with the simulator) turns them into the decider's input."""
        connected = self.ctl.hub.connected_ids()
        held = [
            HeldTask(aid, slots, queued, tuple((p["agent_id"], len(p["slot_ids"])) for p in assignment or []))
            for aid, slots, queued, assignment in s.execute(
                select(
                    models.Allocation.id,
                    models.Allocation.slots_needed,
                    models.Allocation.queued_at,
                    models.Allocation.assignment,
                ).where(models.Allocation.state.in_(HELD), models.Allocation.resource_pool == self.pool.pool_name)
            )
        ]
        rows = list(
            s.scalars(
                select(models.Instance).where(
                    models.Instance.resource_pool == self.pool.pool_name, models.Instance.state.in_(LIVE_INSTANCE)
                )
            )
        )
        agents = (
            {a.id: a for a in s.scalars(select(models.Agent).where(models.Agent.id.in_([r.id for r in rows])))}
            if rows
            else {}
        )
        facts = []
        for row in rows:
            agent = agents.get(row.id)
            facts.append(
                InstanceFacts(
                    row.id,
                    row.instance_type,
                    LIVE_STATE[row.state],
                    launched_at=row.launched_at,
                    slots=len(agent.slots) if agent is not None else row.slots,
                    spot=row.spot,
                    # a draining instance, like one the cloud reclaims, goes away: no capacity for new work
                    interrupted=row.interrupted_at is not None or row.draining_since is not None,
                    cordoned=row.cordoned_since is not None,
                    agent_connected=(agent is not None and agent.state == AgentState.CONNECTED and row.id in connected),
                    agent_disconnected_at=agent.disconnected_at if agent is not None else None,
                )
            )
        # a task its experiment's max_slots holds back (as the last scheduling pass saw) is no demand, nor is
        # a checkpoint GC task: pedl boots no instance to delete files (the GC worker ends one no agent takes)
        waiting = [
            PendingTask(aid, slots, queued)
            for aid, slots, queued in s.execute(
                select(models.Allocation.id, models.Allocation.slots_needed, models.Allocation.queued_at)
                .outerjoin(models.GenericTask, models.GenericTask.id == models.Allocation.task_id)
                .where(
                    models.Allocation.state == AllocationState.PENDING,
                    models.Allocation.resource_pool == self.pool.pool_name,
                    or_(models.Allocation.wait_kind.is_(None), models.Allocation.wait_kind != WaitKind.MAX_SLOTS),
                    or_(models.GenericTask.kind.is_(None), models.GenericTask.kind != GC_TASK_KIND),
                )
            )
        ]
        # the idle clocks live on the rows: `snapshot` updates a dict of them, the changes go back
        idle = {row.id: row.idle_since for row in rows if row.idle_since is not None}
        out = snapshot(self.now, facts, held, waiting, idle)
        for row in rows:
            if row.idle_since != idle.get(row.id):
                row.idle_since = idle.get(row.id)
        self.idle_since = idle
        return out

    # -- doing ---------------------------------------------------------------------------------

    def _terminate(self, decision: Decision) -> None:
        ids = [i for i, _ in decision.terminate]
        if not ids:
            return
        try:
            self.provider.terminate(ids)
        except CloudError as exc:
            self._record_error(exc, f"terminating {', '.join(ids)}")
            return
        except ForeignInstance as exc:  # never touch what is not ours; say so loudly
            log.error("pool %s: refused to terminate: %s", self.pool.pool_name, exc)
            return
        log.info("pool %s: terminated %s", self.pool.pool_name, ", ".join(f"{i} ({r})" for i, r in decision.terminate))

    def _launch(self, decision: Decision) -> None:
        for launch in decision.launch:
            request = LaunchRequest(launch.instance_type, launch.count, launch.spot, uuid.uuid4().hex, launch.slots)
            try:
                created = self.provider.launch(request)
            except CloudError as exc:
                self.ctl.metrics.launch_failures.labels(pool=self.pool.pool_name, kind=exc.kind.value).inc()
                if exc.kind == CloudErrorKind.CAPACITY:
                    # this type (and market) is out: the next pass falls back at once
                    self.unavailable[(launch.instance_type, launch.spot)] = self.now + self.cfg.capacity_retry_period
                    self._record_error(
                        exc,
                        f"launching {launch.count} x {launch.instance_type}{' (spot)' if launch.spot else ''}",
                        backoff=False,
                    )
                    self.ctl.wake_provisioners()
                else:
                    self._record_error(exc, f"launching {launch.count} x {launch.instance_type}")
                return
            self._clear_errors()
            for ci in created:
                self.ctl.metrics.launches.labels(
                    pool=self.pool.pool_name, instance_type=ci.instance_type, market=market(ci.spot)
                ).inc()
            self.ctl.run(lambda s, c=created, r=request: self._record_launch(s, c, r))
            log.info("pool %s: launched %s", self.pool.pool_name, ", ".join(c.id for c in created))

    def _record_launch(self, s: Session, created: list[CloudInstance], request: LaunchRequest) -> None:
        now = self.now
        self._save_status(s)  # the backoff cleared by this success
        for ci in created:
            if s.get(models.Instance, ci.id) is not None:
                continue
            s.add(
                models.Instance(
                    id=ci.id,
                    resource_pool=self.pool.pool_name,
                    provider=self.provider.name,
                    instance_type=ci.instance_type,
                    spot=ci.spot,
                    slots=request.slots,
                    price_per_hour=self._price(ci),
                    launch_token=request.token,
                    spot_request_id=ci.spot_request_id,
                    launched_at=ci.launched_at or now,
                    state=IS.REQUESTED if ci.state == CloudState.REQUESTED else IS.STARTING,
                )
            )
            record_event(
                s,
                now,
                "instance",
                ci.id,
                f"launched {ci.instance_type}{' spot' if ci.spot else ''} for pool {self.pool.pool_name}",
                to_state=IS.REQUESTED if ci.state == CloudState.REQUESTED else IS.STARTING,
            )

    def _price(self, ci: CloudInstance) -> float:
        """What the instance costs per hour: its type's spot price when it is spot."""
        return self.cfg.spot_price_of(ci.instance_type) if ci.spot else self.cfg.price_of(ci.instance_type)

    def _backoff_delay(self) -> float:
        base = self.cfg.launch_error_backoff * (2 ** max(self.status.consecutive_errors - 1, 0))
        return min(base, self.cfg.launch_error_backoff_max)

    def _record_error(self, exc: CloudError, doing: str, backoff: bool = True) -> None:
        now = self.now
        self.status.consecutive_errors += 1
        delay = self._backoff_delay() if backoff else 0.0
        self.status.backoff_until = now + delay if backoff else self.status.backoff_until
        message = f"{doing} failed: {exc}" + (f"; retrying in {delay:g}s" if backoff else "; trying another option")
        self.status.last_error, self.status.last_error_at = message, now
        log.warning("pool %s: %s", self.pool.pool_name, message)

        def fn(s: Session) -> None:
            self._save_status(s)
            record_event(s, now, "pool", self.pool.pool_name, message, level="warning")
            waiting = {
                a.trial_id
                for a in s.scalars(
                    select(models.Allocation).where(
                        models.Allocation.state == AllocationState.PENDING,
                        models.Allocation.resource_pool == self.pool.pool_name,
                    )
                )
            }
            exp_ids = {t.experiment_id for t in s.scalars(select(models.Trial).where(models.Trial.id.in_(waiting)))}
            for exp_id in exp_ids:
                record_event(s, now, "experiment", exp_id, f"waiting for capacity: {message}", level="warning")

        self.ctl.run(fn)

    def _clear_errors(self) -> None:
        self.status.consecutive_errors = 0
        self.status.backoff_until = None
