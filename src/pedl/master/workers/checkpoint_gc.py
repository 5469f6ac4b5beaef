"""The checkpoint garbage collection worker: collects the experiments asked for, one at a time in a thread,
as checkpoints/gc.py describes (plan, hold, delete outside any transaction and lock, or a GC task; mark)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.master.checkpoints import gc_tasks as checkpoint_gc_tasks
from pedl.master.checkpoints.deletion import Deletion, Outcome, delete_from_storage
from pedl.master.checkpoints.gc import MAX_PER_TASK, Plan, experiments_to_sweep, mark_deleted, plan
from pedl.master.checkpoints.storage_roots import allowed_roots, checkpoint_problem
from pedl.master.lifecycle import checkpoint_gc_holds, checkpoint_gc_task_rows
from pedl.master.lifecycle.checkpoint_gc_holds import BY_MASTER_GC
from pedl.master.lifecycle.transitions import record_event
from pedl.master.model_registry import versions as model_versions
from pedl.master.worker_passes import run_pass

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

log = logging.getLogger(__name__)

RETRY_FIRST = 30.0  # seconds before a failed deletion is tried again; doubles up to RETRY_MAX
RETRY_MAX = 3600.0
IDLE_WAIT = 60.0


class CheckpointGC:
    """Collects the experiments asked for, one at a time, in a worker thread.

    `request(experiment_id)` is cheap and safe to call inside the controller's transaction: the
    worker plans under the cluster lock (so it sees that transaction committed) but deletes from
    storage outside it. Failed deletions leave the row COMPLETED and are retried with backoff."""

    def __init__(
        self, ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config
    ) -> None:
        self.ctx = ctx
        self.storage_for = storage_for
        self._pending: dict[int, float] = {}  # experiment id -> not before (clock time)
        self._failures: dict[int, int] = {}  # experiment id -> consecutive failed collections
        self._tasks: dict[int, str] = {}  # experiment id -> the GC task its last collection started
        self._lock = threading.Lock()  # guards _pending and _failures
        self._busy = threading.Lock()  # one collection at a time
        self._wake: Callable[[], object] = lambda: None

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
            except Exception:  # the collections go on; the next pass looks again
                log.exception("ending overdue checkpoint GC tasks failed")
            now = self.ctx.clock.now()
            with self._lock:
                due = sorted(e for e, at in self._pending.items() if at <= now)
                for e in due:
                    del self._pending[e]
            for experiment_id in due:
                try:
                    self.collect(experiment_id)
                except Exception as exc:  # one experiment's failure must not stop the others
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
        if the_plan is None or not the_plan.deletions:
            self._failures.pop(experiment_id, None)
            return outcome
        assert isinstance(the_plan, Plan)
        on_agent = checkpoint_gc_tasks.runs_on_agent(self.ctx, experiment_id, the_plan.deletions[0].storage)
        if on_agent:  # the task's launch holds the rows, its report marks them
            done = []
            self._start_task(the_plan, outcome)
        else:
            done = self._delete(self._hold(the_plan, outcome), outcome)
        with self.ctx.db.session() as s:
            now = self.ctx.clock.now()
            mark_deleted(s, now, experiment_id, the_plan.policy, done)
            if outcome.refused:
                first_uuid, first_why = next(iter(outcome.refused.items()))
                record_event(
                    s,
                    now,
                    "experiment",
                    experiment_id,
                    f"checkpoint garbage collection left {len(outcome.refused)} checkpoint(s) alone, outside "
                    f"the master's checkpoint storage roots; checkpoint {first_uuid}: {first_why}",
                    level="warning",
                )
            if outcome.failed:
                first_uuid, first_why = next(iter(outcome.failed.items()))
                record_event(
                    s,
                    now,
                    "experiment",
                    experiment_id,
                    f"checkpoint garbage collection could not delete {len(outcome.failed)} checkpoint(s) "
                    f"and will retry; checkpoint {first_uuid}: {first_why}",
                    level="warning",
                )
        if outcome.failed:
            self._retry_later(experiment_id, next(iter(outcome.failed.values())))
        else:
            self._failures.pop(experiment_id, None)
        if not on_agent:  # _start_task logged the task it started
            log.info(
                "checkpoint garbage collection of experiment %s: %d deleted, %d failed, %d left alone",
                experiment_id,
                len(outcome.deleted),
                len(outcome.failed),
                len(outcome.refused),
            )
        return outcome

    def _previous_task_done(self, experiment_id: int, outcome: Outcome) -> bool:
        """Whether this collection may go on: no GC task of an earlier one is live, and the last one
        (if any) succeeded; one that failed is noted in `outcome.failed` and retried with backoff."""
        task_id = self._tasks.get(experiment_id)
        if task_id is None:
            return True
        # under the cluster lock, as `plan`: the task's end asks for this collection inside its transaction
        result = self.ctx.controller.run(lambda s: checkpoint_gc_task_rows.outcome(s, task_id))
        if result.live:
            return False
        self._tasks.pop(experiment_id, None)
        if result.ok:
            self._failures.pop(experiment_id, None)
            return True
        outcome.failed[task_id] = result.why
        with self.ctx.db.session() as s:
            record_event(
                s,
                self.ctx.clock.now(),
                "experiment",
                experiment_id,
                f"checkpoint garbage collection will retry: {result.why}",
                level="warning",
            )
        self._retry_later(experiment_id, result.why)
        return False

    def _start_task(self, the_plan: Plan, outcome: Outcome) -> None:
        """A GC task for the plan's checkpoints inside the roots (at most MAX_PER_TASK: the next
        collection, when it ends, takes the rest)."""
        items = [
            checkpoint_gc_tasks.Item(d.uuid, checkpoint_gc_tasks.directory(d.storage, d.uuid))
            for d in self._inside_roots(the_plan, outcome)[:MAX_PER_TASK]
        ]
        if not items:
            return
        job = checkpoint_gc_tasks.Job(the_plan.experiment_id, items, policy=asdict(the_plan.policy))
        task_id = checkpoint_gc_tasks.start(self.ctx, job)
        if task_id is not None:
            with self._lock:
                self._tasks[the_plan.experiment_id] = task_id
            log.info(
                "checkpoint garbage collection of experiment %s: task %s for %d checkpoint(s)",
                the_plan.experiment_id,
                task_id,
                len(items),
            )

    def _inside_roots(self, the_plan: Plan, outcome: Outcome) -> list[Deletion]:
        """The plan's checkpoints inside the storage roots; one outside is left alone (`outcome.refused`)."""
        inside = []
        for d in the_plan.deletions:
            why = checkpoint_problem(d.storage, d.uuid, allowed_roots(self.ctx.config), recorded=d.recorded)
            if why is not None:
                log.warning("checkpoint %s left alone: %s", d.uuid, why)
                outcome.refused[d.uuid] = why
            else:
                inside.append(d)
        return inside

    def _hold(self, the_plan: Plan, outcome: Outcome) -> list[Deletion]:
        """The plan's checkpoints inside the roots, held (checkpoint_gc_holds.hold) before the master deletes
        them; one outside the roots is left alone (`outcome.refused`), one registered meanwhile is kept."""
        inside = self._inside_roots(the_plan, outcome)
        with self.ctx.db.session() as s:
            held = set(
                checkpoint_gc_holds.hold(s, self.ctx.clock.now(), [d.uuid for d in inside], BY_MASTER_GC, "deleted")
            )
        return [d for d in inside if d.uuid in held]

    def _delete(self, deletions: Sequence[Deletion], outcome: Outcome) -> list[Deletion]:
        return delete_from_storage(
            deletions, allowed_roots(self.ctx.config), self.storage_for, outcome, registered=self._registered
        )

    def _registered(self, uuid: str) -> bool:
        with self.ctx.db.read_session() as s:
            return model_versions.is_registered(s, uuid)

    def _retry_later(self, experiment_id: int, why: str) -> None:
        n = self._failures.get(experiment_id, 0) + 1
        self._failures[experiment_id] = n
        delay = min(RETRY_FIRST * 2 ** (n - 1), RETRY_MAX)
        log.warning(
            "checkpoint garbage collection of experiment %s failed (%s); retrying in %.0fs", experiment_id, why, delay
        )
        self.request(experiment_id, delay)

    def sweep(self) -> None:
        with self.ctx.db.session() as s:
            checkpoint_gc_holds.release_requests(s, self.ctx.clock.now())
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
        except Exception:  # the sweep is a safety net; requests still work
            log.exception("checkpoint garbage collection sweep failed")
        while not stop.is_set():
            wake.clear()
            next_at = None
            try:
                next_at = await run_pass(self.run_pending)
            except Exception:  # keep the worker alive
                log.exception("checkpoint garbage collection pass failed")
            timeout = IDLE_WAIT if next_at is None else max(0.05, min(next_at - self.ctx.clock.now(), IDLE_WAIT))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), timeout=timeout)
