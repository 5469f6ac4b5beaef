"""Checkpoint garbage collection: the plan of what an experiment's save_* policy no longer keeps (decided
by services/checkpoint_retention.py, pure), and the worker that deletes them (services/checkpoint_deletion.py,
or a checkpoint GC task on an agent: services/checkpoint_gc_tasks.py) and marks them DELETED.

The experiment flow only asks for a collection (Controller.want_checkpoint_gc) when a trial or the
experiment ends. The worker reads what to delete in a short transaction, deletes from storage with
no transaction open and without the cluster lock, then marks the rows in another short transaction.

A checkpoint's directory is its experiment's storage plus its uuid, never what a request said. Each
is checked on resolved paths against the master's storage roots just before it is deleted
(storage_roots.checkpoint_problem); one outside them (stored before the roots were enforced, or a
directory that is a symlink) is left alone, logged and not marked deleted. Deleting unlinks
symlinks inside a checkpoint and never follows them. A checkpoint registered as a model version
(services/model_versions.py) is never deleted: neither planned nor, checked again just before, deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.checkpoint_storage import experiment_storage
from pedl.master.db import models
from pedl.master.lifecycle import TERMINAL_TRIAL, CheckpointState
from pedl.master.services import checkpoint_gc_tasks, checkpoints, model_versions
from pedl.master.services.checkpoint_deletion import Deletion, Outcome, delete_from_storage
from pedl.master.services.checkpoint_retention import CheckpointFacts, RetentionPolicy, metric_value, select_deletions
from pedl.master.services.storage_roots import allowed_roots, checkpoint_problem
from pedl.master.services.transitions import record_event, set_checkpoint_state
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

C = CheckpointState
RETRY_FIRST = 30.0  # seconds before a failed deletion is tried again; doubles up to RETRY_MAX
RETRY_MAX = 3600.0
IDLE_WAIT = 60.0
MAX_PER_TASK = 1000  # checkpoints one GC task is given (api/checkpoint_gc_reports.py bounds its report so)


# -- reading and marking (short transactions) -----------------------------------------------------


@dataclass
class Plan:
    experiment_id: int
    policy: RetentionPolicy
    deletions: list[Deletion] = field(default_factory=list)


def plan(s: Session, experiment_id: int, default_storage: Mapping[str, Any] | None = None) -> Plan | None:
    """What to delete of an experiment now; None when the experiment does not exist.
    `default_storage` (the master's) stands in for an experiment config without a storage."""
    exp = s.get(models.Experiment, experiment_id)
    if exp is None:
        return None
    storage_cfg = experiment_storage(exp.config, default_storage)
    searcher = exp.config.get("searcher") or {}
    policy = RetentionPolicy.of(storage_cfg)
    states = dict(s.execute(select(models.Trial.id, models.Trial.state)
                            .where(models.Trial.experiment_id == experiment_id)).all())
    closed = {tid for tid, state in states.items() if state in TERMINAL_TRIAL}
    out = Plan(experiment_id, policy)
    if not closed:
        return out
    rows = list(s.scalars(select(models.Checkpoint).where(
        models.Checkpoint.experiment_id == experiment_id, models.Checkpoint.state == C.COMPLETED,
        models.Checkpoint.trial_id.is_not(None))))
    if not any(r.trial_id in closed for r in rows):
        return out
    validations = checkpoints.validations_at(s, [(r.trial_id, r.steps_completed) for r in rows])
    metric = searcher.get("metric")
    facts = [CheckpointFacts(r.uuid, r.trial_id, r.steps_completed, r.report_time,
                             metric_value(validations.get((r.trial_id, r.steps_completed)), metric))
             for r in rows]
    doomed = set(select_deletions(facts, policy, smaller_is_better=bool(searcher.get("smaller_is_better", True)),
                                  closed_trials=closed))
    doomed -= model_versions.registered_in_experiment(s, experiment_id)  # a model version's: kept for good
    out.deletions = [Deletion(r.uuid, r.trial_id, storage_cfg, dict(r.storage or {}))
                     for r in sorted(rows, key=lambda r: (r.trial_id, r.steps_completed)) if r.uuid in doomed]
    return out


def mark_deleted(s: Session, now: float, experiment_id: int, policy: RetentionPolicy,
                 deleted: Sequence[Deletion]) -> int:
    """Mark deleted checkpoints STATE_DELETED, with an event for each and one per trial; returns how
    many rows changed (a row something else changed meanwhile is left alone)."""
    changed: dict[int, list[str]] = defaultdict(list)
    for d in deleted:
        row = s.get(models.Checkpoint, d.uuid)
        if row is None or row.state != C.COMPLETED:
            continue
        set_checkpoint_state(s, now, row, C.DELETED, f"deleted by garbage collection ({policy.describe()})")
        changed[d.trial_id].append(row.uuid)
    for trial_id, uuids in changed.items():
        record_event(s, now, "trial", trial_id,
                     f"checkpoint garbage collection deleted {len(uuids)} checkpoint(s) ({policy.describe()}): "
                     + ", ".join(uuids))
    return sum(len(u) for u in changed.values())


def experiments_to_sweep(s: Session) -> list[int]:
    """Experiments that have completed checkpoints of ended trials: after a master restart a
    collection that was asked for but not done is found again this way."""
    q = (select(models.Checkpoint.experiment_id).distinct()
         .join(models.Trial, models.Trial.id == models.Checkpoint.trial_id)
         .where(models.Checkpoint.state == C.COMPLETED,
                models.Trial.state.in_(sorted(TERMINAL_TRIAL))))
    return sorted(e for e in s.scalars(q) if e is not None)


# -- the worker -----------------------------------------------------------------------------------


class CheckpointGC:
    """Collects the experiments asked for, one at a time, in a worker thread.

    `request(experiment_id)` is cheap and safe to call inside the controller's transaction: the
    worker plans under the cluster lock (so it sees that transaction committed) but deletes from
    storage outside it. Failed deletions leave the row COMPLETED and are retried with backoff."""

    def __init__(self, ctx: MasterContext,
                 storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config) -> None:
        self.ctx = ctx
        self.storage_for = storage_for
        self._pending: dict[int, float] = {}  # experiment id -> not before (clock time)
        self._failures: dict[int, int] = {}  # experiment id -> consecutive failed collections
        self._tasks: dict[int, str] = {}  # experiment id -> the GC task its last collection started
        self._lock = threading.Lock()  # guards _pending and _failures
        self._busy = threading.Lock()  # one collection at a time
        self._wake: Callable[[], None] = lambda: None

    def request(self, experiment_id: int, delay: float = 0.0) -> None:
        at = self.ctx.clock.now() + delay
        with self._lock:
            self._pending[experiment_id] = min(at, self._pending.get(experiment_id, at))
        self._wake()

    def pending(self) -> dict[int, float]:
        with self._lock:
            return dict(self._pending)

    def run_pending(self) -> float | None:
        """Collect every experiment that is due; returns when the next one is due (None: none)."""
        with self._busy:
            try:  # before `due`: a collection whose task it ends is asked again at once
                checkpoint_gc_tasks.end_overdue(self.ctx)
            except Exception:  # noqa: BLE001 - the collections go on; the next pass looks again
                log.exception("ending overdue checkpoint GC tasks failed")
            now = self.ctx.clock.now()
            with self._lock:
                due = sorted(e for e, at in self._pending.items() if at <= now)
                for e in due:
                    del self._pending[e]
            for experiment_id in due:
                try:
                    self.collect(experiment_id)
                except Exception as exc:  # noqa: BLE001 - one experiment's failure must not stop the others
                    log.exception("checkpoint garbage collection of experiment %s failed", experiment_id)
                    self._retry_later(experiment_id, f"{type(exc).__name__}: {exc}")
            with self._lock:
                return min(self._pending.values(), default=None)

    def collect(self, experiment_id: int) -> Outcome:
        """One collection of one experiment: plan, delete from storage (in a GC task on an agent where
        checkpoint_gc_tasks.runs_on_agent says so: its report marks the rows), mark. A GC task of the
        last collection still running: nothing now (its end asks again); one that failed: retried later."""
        outcome = Outcome()
        if not self._previous_task_done(experiment_id, outcome):
            return outcome
        default_storage = self.ctx.config.effective_checkpoint_storage().model_dump(mode="json")
        the_plan = self.ctx.controller.run(lambda s: plan(s, experiment_id, default_storage))
        if the_plan is None or not the_plan.deletions:  # type: ignore[union-attr]
            self._failures.pop(experiment_id, None)
            return outcome
        assert isinstance(the_plan, Plan)
        on_agent = checkpoint_gc_tasks.runs_on_agent(self.ctx, experiment_id, the_plan.deletions[0].storage)
        if on_agent:  # the task's report marks the rows
            done = []
            self._start_task(the_plan, outcome)
        else:
            done = self._delete(the_plan.deletions, outcome)
        with self.ctx.db.session() as s:
            now = self.ctx.clock.now()
            mark_deleted(s, now, experiment_id, the_plan.policy, done)
            if outcome.refused:
                first_uuid, first_why = next(iter(outcome.refused.items()))
                record_event(s, now, "experiment", experiment_id,
                             f"checkpoint garbage collection left {len(outcome.refused)} checkpoint(s) alone, outside "
                             f"the master's checkpoint storage roots; checkpoint {first_uuid}: {first_why}",
                             level="warning")
            if outcome.failed:
                first_uuid, first_why = next(iter(outcome.failed.items()))
                record_event(s, now, "experiment", experiment_id,
                             f"checkpoint garbage collection could not delete {len(outcome.failed)} checkpoint(s) "
                             f"and will retry; checkpoint {first_uuid}: {first_why}", level="warning")
        if outcome.failed:
            self._retry_later(experiment_id, next(iter(outcome.failed.values())))
        else:
            self._failures.pop(experiment_id, None)
        if not on_agent:  # _start_task logged the task it started
            log.info("checkpoint garbage collection of experiment %s: %d deleted, %d failed, %d left alone",
                     experiment_id, len(outcome.deleted), len(outcome.failed), len(outcome.refused))
        return outcome

    def _previous_task_done(self, experiment_id: int, outcome: Outcome) -> bool:
        """Whether this collection may go on: no GC task of an earlier one is live, and the last one
        (if any) succeeded; one that failed is noted in `outcome.failed` and retried with backoff."""
        task_id = self._tasks.get(experiment_id)
        if task_id is None:
            return True
        # under the cluster lock, as `plan`: the task's end asks for this collection inside its transaction
        result = self.ctx.controller.run(lambda s: checkpoint_gc_tasks.outcome(s, task_id))
        if result.live:
            return False
        self._tasks.pop(experiment_id, None)
        if result.ok:
            self._failures.pop(experiment_id, None)
            return True
        outcome.failed[task_id] = result.why
        with self.ctx.db.session() as s:
            record_event(s, self.ctx.clock.now(), "experiment", experiment_id,
                         f"checkpoint garbage collection will retry: {result.why}", level="warning")
        self._retry_later(experiment_id, result.why)
        return False

    def _start_task(self, the_plan: Plan, outcome: Outcome) -> None:
        """A GC task for the plan's checkpoints inside the roots (at most MAX_PER_TASK: the next
        collection, when it ends, takes the rest)."""
        items = []
        for d in the_plan.deletions:
            why = checkpoint_problem(d.storage, d.uuid, allowed_roots(self.ctx.config), recorded=d.recorded)
            if why is not None:
                log.warning("checkpoint %s left alone: %s", d.uuid, why)
                outcome.refused[d.uuid] = why
            elif len(items) < MAX_PER_TASK:
                items.append(checkpoint_gc_tasks.Item(d.uuid, checkpoint_gc_tasks.directory(d.storage, d.uuid)))
        if not items:
            return
        job = checkpoint_gc_tasks.Job(the_plan.experiment_id, items, policy=asdict(the_plan.policy))
        task_id = checkpoint_gc_tasks.start(self.ctx, job)
        if task_id is not None:
            with self._lock:
                self._tasks[the_plan.experiment_id] = task_id
            log.info("checkpoint garbage collection of experiment %s: task %s for %d checkpoint(s)",
                     the_plan.experiment_id, task_id, len(items))

    def _delete(self, deletions: Sequence[Deletion], outcome: Outcome) -> list[Deletion]:
        return delete_from_storage(deletions, allowed_roots(self.ctx.config), self.storage_for, outcome,
                                   registered=self._registered)

    def _registered(self, uuid: str) -> bool:
        with self.ctx.db.read_session() as s:
            return model_versions.is_registered(s, uuid)

    def _retry_later(self, experiment_id: int, why: str) -> None:
        n = self._failures.get(experiment_id, 0) + 1
        self._failures[experiment_id] = n
        delay = min(RETRY_FIRST * 2 ** (n - 1), RETRY_MAX)
        log.warning("checkpoint garbage collection of experiment %s failed (%s); retrying in %.0fs",
                    experiment_id, why, delay)
        self.request(experiment_id, delay)

    def sweep(self) -> None:
        with self.ctx.db.read_session() as s:
            ids = experiments_to_sweep(s)
        for experiment_id in ids:
            self.request(experiment_id)

    async def run_loop(self, stop: asyncio.Event) -> None:
        """The worker: sleeps until asked (or a retry is due), then collects in a thread."""
        wake = asyncio.Event()
        loop = asyncio.get_running_loop()
        self._wake = lambda: loop.call_soon_threadsafe(wake.set)
        try:
            await run_pass(self.sweep)
        except Exception:  # noqa: BLE001 - the sweep is a safety net; requests still work
            log.exception("checkpoint garbage collection sweep failed")
        while not stop.is_set():
            wake.clear()
            next_at = None
            try:
                next_at = await run_pass(self.run_pending)
            except Exception:  # noqa: BLE001 - keep the worker alive
                log.exception("checkpoint garbage collection pass failed")
            timeout = IDLE_WAIT if next_at is None else max(0.05, min(next_at - self.ctx.clock.now(), IDLE_WAIT))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=timeout)
