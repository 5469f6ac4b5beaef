"""What the cluster side knows of a checkpoint GC task (checkpoints/gc_tasks.py): its kind, what it
runs, what its secrets hold (the uuids given, who asked, the uuids reported), how it went (`outcome`) and
what its end means (`ended`, called by experiment_progression.allocation_ended). Apart from
checkpoint_gc_tasks, which reaches the master's context and the model registry, so that no import cycle
runs through the cluster's modules."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle.checkpoint_gc_holds import release
from pedl.master.lifecycle.effects import ClusterEffects
from pedl.master.lifecycle.states import LIVE_ALLOCATION, AllocationState
from pedl.master.lifecycle.transitions import record_event

KIND = "checkpoint_gc"
SCRIPT_PATH = ".pedl/checkpoint_gc.py"
SPEC_PATH = ".pedl/checkpoint_gc.json"
ORIGIN_GC = "gc"  # the GC worker's collection (per the save_* policy)
ORIGIN_USER = "user"  # a user's delete or file removal
SECRET = "checkpoint_gc"


def description(experiment_id: int) -> str:
    return f"Checkpoint GC (Experiment {experiment_id})"


def entrypoint() -> list[str]:
    return ["python3", SCRIPT_PATH, SPEC_PATH]


def secret_of(task: Any) -> dict[str, Any]:
    return dict((task.secrets or {}).get(SECRET) or {})


@dataclass(frozen=True)
class Outcome:
    live: bool
    ok: bool = False
    why: str = ""


def outcome(s: Session, task_id: str) -> Outcome:
    """How a GC task went: still live, or ended having reported every checkpoint it was given with exit
    code 0 and, for a collection, each of them emptied (else why not)."""
    task = s.get(models.GenericTask, task_id)
    alloc = s.scalar(
        select(models.Allocation)
        .where(models.Allocation.task_id == task_id)
        .order_by(models.Allocation.queued_at.desc())
        .limit(1)
    )
    if task is None or alloc is None:
        return Outcome(False, False, f"checkpoint GC task {task_id} is gone")
    if alloc.state in LIVE_ALLOCATION:
        return Outcome(True)
    secret = secret_of(task)
    missing = sorted(set(secret.get("uuids") or []) - set(secret.get("reported") or []))
    kept = sorted(secret.get("unfinished") or [])  # a collection's checkpoints it could not empty
    if alloc.exit_code == 0 and not missing and not kept:
        return Outcome(False, True)
    why = alloc.exit_reason or f"exited with code {alloc.exit_code}"
    if missing:
        why += f"; it reported nothing of {len(missing)} checkpoint(s), {missing[0]} first"
    if kept:
        why += f"; files are left of {len(kept)} checkpoint(s), {kept[0]} first"
    return Outcome(False, False, f"checkpoint GC task {task_id} failed ({why})")


WAIT_LIMIT = 120.0  # a GC task no agent has taken by then is ended: its pool emptied (nothing boots for it)
RUN_LIMIT = 3600.0  # a GC task still running by then is killed: hung


def overdue(state: str, queued_at: float, assigned_at: float | None, now: float) -> str | None:
    """Why a live GC task's allocation must end now (None: it may go on). One being killed already
    (TERMINATING) waits for its agent."""
    if state == AllocationState.PENDING and now - queued_at >= WAIT_LIMIT:
        return f"no agent took it within {WAIT_LIMIT:.0f} s"
    if (
        state not in (AllocationState.PENDING, AllocationState.TERMINATING)
        and now - (assigned_at if assigned_at is not None else queued_at) >= RUN_LIMIT
    ):
        return f"it was still running after {RUN_LIMIT:.0f} s"
    return None


def ended(fx: ClusterEffects, s: Session, alloc: models.Allocation) -> None:
    """A generic task's allocation ended (experiment_progression.allocation_ended, after terminate): if it
    is a GC task, the worker's collection is asked again (it deletes again what the task left unfinished,
    with backoff after a failure); a user's request that failed releases the checkpoints the task did not
    report (PARTIALLY_DELETED: some of their files may be gone) and leaves a warning on the experiment."""
    task = s.get(models.GenericTask, alloc.task_id)
    if task is None or task.kind != KIND or not task.experiment_ids:
        return
    experiment_id = int(task.experiment_ids[0])
    secret = secret_of(task)
    if secret.get("origin") == ORIGIN_GC:
        fx.want_checkpoint_gc(experiment_id)
        return
    result = outcome(s, task.id)
    if not result.ok:
        missing = sorted(set(secret.get("uuids") or []) - set(secret.get("reported") or []))
        release(s, fx.now, missing, f"checkpoint GC task {task.id} ended without reporting it")
        record_event(
            s,
            fx.now,
            "experiment",
            experiment_id,
            f"{result.why}: the checkpoints it did not report are left PARTIALLY_DELETED (some of their "
            "files may be gone); ask again",
            level="warning",
        )
