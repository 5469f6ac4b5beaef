"""Checkpoint garbage collection: which checkpoints an experiment's save_* policy no longer keeps
(`select_deletions`, pure), and the worker that deletes them from storage and marks them DELETED.

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
import json
import logging
import math
import threading
from collections import defaultdict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.checkpoint_storage import experiment_storage
from pedl.master.db import models
from pedl.master.lifecycle import TERMINAL_TRIAL, CheckpointState
from pedl.master.services import checkpoint_gc_tasks, checkpoints, model_versions
from pedl.master.services.storage_roots import StorageRoots, allowed_roots, checkpoint_problem
from pedl.master.services.transitions import record_event, set_checkpoint_state

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

C = CheckpointState
RETRY_FIRST = 30.0  # seconds before a failed deletion is tried again; doubles up to RETRY_MAX
RETRY_MAX = 3600.0
IDLE_WAIT = 60.0
MAX_PER_TASK = 1000  # checkpoints one GC task is given (api/checkpoint_gc_reports.py bounds its report so)


# -- deciding ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class RetentionPolicy:
    """Determined's save_* numbers: a checkpoint is kept if any of them keeps it."""

    save_experiment_best: int = 0
    save_trial_best: int = 1
    save_trial_latest: int = 1

    @classmethod
    def of(cls, storage_config: Mapping[str, Any]) -> RetentionPolicy:
        defaults = cls()
        return cls(**{name: int(storage_config.get(name) if storage_config.get(name) is not None
                                else getattr(defaults, name))
                      for name in ("save_experiment_best", "save_trial_best", "save_trial_latest")})

    def describe(self) -> str:
        return (f"save_trial_latest={self.save_trial_latest}, save_trial_best={self.save_trial_best}, "
                f"save_experiment_best={self.save_experiment_best}")


@dataclass(frozen=True)
class CheckpointFacts:
    """What the decision needs of one completed checkpoint. `metric` is the searcher metric of the
    trial's validation at the checkpoint's steps_completed, None when there is none (or it is not
    a finite number): such a checkpoint can be kept as a latest one, never as a best one."""

    uuid: str
    trial_id: int
    steps_completed: int
    report_time: float = 0.0
    metric: float | None = None


def select_deletions(checkpoints: Sequence[CheckpointFacts], policy: RetentionPolicy, *,
                     smaller_is_better: bool, closed_trials: Collection[int]) -> list[str]:
    """The uuids to delete, in (trial, steps) order: checkpoints of `closed_trials` that none of the
    policy's rules keeps. Checkpoints of trials still running are never deleted, but they count
    for save_experiment_best, so a collection after one trial ends agrees with the one at the end of
    the experiment (more checkpoints can only push an old one out of the experiment's best).

    Ties: the later checkpoint (more steps, then later report) counts as newer and as better."""

    def newest_first(c: CheckpointFacts) -> tuple:
        return (-c.steps_completed, -c.report_time, c.uuid)

    def best_first(c: CheckpointFacts) -> tuple:
        assert c.metric is not None
        return (c.metric if smaller_is_better else -c.metric, *newest_first(c))

    keep: set[str] = set()
    by_trial: dict[int, list[CheckpointFacts]] = defaultdict(list)
    for c in checkpoints:
        by_trial[c.trial_id].append(c)
    for trial_checkpoints in by_trial.values():
        keep.update(c.uuid for c in sorted(trial_checkpoints, key=newest_first)[:policy.save_trial_latest])
        scored = [c for c in trial_checkpoints if c.metric is not None]
        keep.update(c.uuid for c in sorted(scored, key=best_first)[:policy.save_trial_best])
    scored = [c for c in checkpoints if c.metric is not None]
    keep.update(c.uuid for c in sorted(scored, key=best_first)[:policy.save_experiment_best])
    doomed = [c for c in checkpoints if c.trial_id in closed_trials and c.uuid not in keep]
    return [c.uuid for c in sorted(doomed, key=lambda c: (c.trial_id, c.steps_completed, c.uuid))]


def metric_value(metrics: Mapping[str, Any] | None, name: str | None) -> float | None:
    value = (metrics or {}).get(name) if name else None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


# -- reading and marking (short transactions) -----------------------------------------------------


@dataclass(frozen=True)
class Deletion:
    uuid: str
    trial_id: int
    storage: dict[str, Any]  # the experiment's checkpoint_storage section: where the files are
    recorded: dict[str, Any] = field(default_factory=dict)  # the row's storage column (a request's, before issue 8)


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


# -- deleting from storage (no transaction open) -------------------------------------------------


@dataclass
class Outcome:
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # uuid -> why; retried
    refused: dict[str, str] = field(default_factory=dict)  # uuid -> why it is outside the roots; left alone


def _delete_all(storage: CheckpointStorage, uuid: str) -> None:
    storage.delete(uuid)


def delete_from_storage(deletions: Sequence[Deletion], roots: StorageRoots,
                        storage_for: Callable[[Mapping[str, Any]], CheckpointStorage], outcome: Outcome, *,
                        registered: Callable[[str], bool],
                        act: Callable[[CheckpointStorage, str], None] = _delete_all) -> list[Deletion]:
    """`act` (by default: delete the whole checkpoint) on each checkpoint's storage, checked against the
    roots just before (one outside them is left alone, logged, in `outcome.refused`); one `registered`
    as a model version meanwhile is kept; a failure is noted in `outcome.failed`. -> those done.
    Garbage collection and a user's delete or file removal (services/checkpoint_edits.py) share it."""
    storages: dict[str, CheckpointStorage] = {}
    done = []
    for d in deletions:
        why = checkpoint_problem(d.storage, d.uuid, roots, recorded=d.recorded)
        if why is not None:
            log.warning("checkpoint %s left alone: %s", d.uuid, why)
            outcome.refused[d.uuid] = why
            continue
        if registered(d.uuid):  # registered as a model version since the plan: kept
            continue
        key = json.dumps(d.storage, sort_keys=True, default=str)
        try:
            if key not in storages:
                storages[key] = storage_for(d.storage)
            act(storages[key], d.uuid)
        except Exception as exc:  # noqa: BLE001 - report (and retry), whatever the storage raised
            outcome.failed[d.uuid] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            continue
        outcome.deleted.append(d.uuid)
        done.append(d)
    return done


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
        if checkpoint_gc_tasks.runs_on_agent(self.ctx, experiment_id, the_plan.deletions[0].storage):
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
            await asyncio.to_thread(self.sweep)
        except Exception:  # noqa: BLE001 - the sweep is a safety net; requests still work
            log.exception("checkpoint garbage collection sweep failed")
        while not stop.is_set():
            wake.clear()
            next_at = None
            try:
                next_at = await asyncio.to_thread(self.run_pending)
            except Exception:  # noqa: BLE001 - keep the worker alive
                log.exception("checkpoint garbage collection pass failed")
            timeout = IDLE_WAIT if next_at is None else max(0.05, min(next_at - self.ctx.clock.now(), IDLE_WAIT))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=timeout)
