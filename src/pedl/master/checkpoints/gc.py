"""Checkpoint garbage collection: the plan of what an experiment's save_* policy no longer keeps (decided
by checkpoints/retention.py, pure), and the worker that deletes them (checkpoints/deletion.py,
or a checkpoint GC task on an agent: checkpoints/gc_tasks.py) and marks them DELETED.

The experiment flow only asks for a collection (Controller.want_checkpoint_gc) when a trial or the
experiment ends. The worker reads what to delete in a short transaction, takes those checkpoints out of
COMPLETED in another (lifecycle/checkpoint_gc_holds.py: PARTIALLY_DELETED and not served while their files
go), deletes from storage with no transaction open and without the cluster lock, then marks the rows
DELETED. A collection that ended before every file was gone leaves its checkpoints PARTIALLY_DELETED, and
the next collection deletes them again (`unfinished`).

A checkpoint's directory is its experiment's storage plus its uuid, never what a request said. Each
is checked on resolved paths against the master's storage roots just before it is deleted
(storage_roots.checkpoint_problem); one outside them (stored before the roots were enforced, or a
directory that is a symlink) is left alone, logged and not marked deleted. Deleting unlinks
symlinks inside a checkpoint and never follows them. A checkpoint registered as a model version
(model_registry/versions.py) is never deleted: neither planned nor, checked again just before, deleted.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.config.checkpoint_storage import experiment_storage
from pedl.master.checkpoints import service as checkpoints
from pedl.master.checkpoints.deletion import Deletion
from pedl.master.checkpoints.retention import CheckpointFacts, RetentionPolicy, metric_value, select_deletions
from pedl.master.db import models
from pedl.master.lifecycle import checkpoint_gc_holds
from pedl.master.lifecycle.checkpoint_gc_holds import BY_MASTER_GC, BY_REQUEST
from pedl.master.lifecycle.checkpoint_gc_task_rows import ORIGIN_GC, secret_of
from pedl.master.lifecycle.states import LIVE_ALLOCATION, TERMINAL_TRIAL, CheckpointState
from pedl.master.lifecycle.transitions import record_event, set_checkpoint_state
from pedl.master.model_registry import versions as model_versions

C = CheckpointState
MAX_PER_TASK = 1000  # checkpoints one GC task is given (api/checkpoint_gc_reports.py bounds its report so)


# -- reading and marking (short transactions) -----------------------------------------------------


@dataclass
class Plan:
    experiment_id: int
    policy: RetentionPolicy
    deletions: list[Deletion] = field(default_factory=list)


def plan(s: Session, experiment_id: int, default_storage: Mapping[str, Any] | None = None) -> Plan | None:
    """What to delete of an experiment now: what an earlier collection left `unfinished`, and what the
    policy no longer keeps; None when the experiment does not exist. `default_storage` (the master's)
    stands in for an experiment config without a storage."""
    exp = s.get(models.Experiment, experiment_id)
    if exp is None:
        return None
    storage_cfg = experiment_storage(exp.config, default_storage)
    searcher = exp.config.get("searcher") or {}
    policy = RetentionPolicy.of(storage_cfg)
    states = dict(
        s.execute(select(models.Trial.id, models.Trial.state).where(models.Trial.experiment_id == experiment_id)).all()
    )
    closed = {tid for tid, state in states.items() if state in TERMINAL_TRIAL}
    out = Plan(
        experiment_id,
        policy,
        [Deletion(r.uuid, r.trial_id or 0, storage_cfg, dict(r.storage or {})) for r in unfinished(s, experiment_id)],
    )
    if not closed:
        return out
    # (each row with its trial: the query takes only the checkpoints of a trial)
    rows = [
        (r, r.trial_id)
        for r in s.scalars(
            select(models.Checkpoint).where(
                models.Checkpoint.experiment_id == experiment_id,
                models.Checkpoint.state == C.COMPLETED,
                models.Checkpoint.trial_id.is_not(None),
            )
        )
        if r.trial_id is not None
    ]
    if not any(trial_id in closed for _, trial_id in rows):
        return out
    validations = checkpoints.validations_at(s, [(trial_id, r.steps_completed) for r, trial_id in rows])
    metric = searcher.get("metric")
    facts = [
        CheckpointFacts(
            r.uuid,
            trial_id,
            r.steps_completed,
            r.report_time,
            metric_value(validations.get((trial_id, r.steps_completed)), metric),
        )
        for r, trial_id in rows
    ]
    doomed = set(
        select_deletions(
            facts, policy, smaller_is_better=bool(searcher.get("smaller_is_better", True)), closed_trials=closed
        )
    )
    doomed -= model_versions.registered_in_experiment(s, experiment_id)  # a model version's: kept for good
    out.deletions += [
        Deletion(r.uuid, trial_id, storage_cfg, dict(r.storage or {}))
        for r, trial_id in sorted(rows, key=lambda row: (row[1], row[0].steps_completed))
        if r.uuid in doomed
    ]
    return out


def unfinished(s: Session, experiment_id: int) -> list[models.Checkpoint]:
    """The experiment's checkpoints whose collection ended before their files were all deleted: held by the
    GC worker on the master (it is planning now, so no deletion of its own runs), or by a collection's GC
    task that is no longer live. They are deleted again."""
    ck = models.Checkpoint
    rows = list(
        s.scalars(
            select(ck)
            .where(ck.experiment_id == experiment_id, ck.deleting_by.is_not(None), ck.state == C.PARTIALLY_DELETED)
            .order_by(ck.trial_id, ck.steps_completed)
        )
    )
    task_ids = sorted({r.deleting_by for r in rows if r.deleting_by is not None} - {BY_MASTER_GC, BY_REQUEST})
    live = (
        set(
            s.scalars(
                select(models.Allocation.task_id).where(
                    models.Allocation.task_id.in_(task_ids), models.Allocation.state.in_(sorted(LIVE_ALLOCATION))
                )
            )
        )
        if task_ids
        else set()
    )
    collections = (
        {
            t.id
            for t in s.scalars(select(models.GenericTask).where(models.GenericTask.id.in_(task_ids)))
            if secret_of(t).get("origin") == ORIGIN_GC
        }
        if task_ids
        else set()
    )
    return [
        r for r in rows if r.deleting_by == BY_MASTER_GC or (r.deleting_by in collections and r.deleting_by not in live)
    ]


def mark_deleted(
    s: Session, now: float, experiment_id: int, policy: RetentionPolicy, deleted: Sequence[Deletion]
) -> int:
    """Mark deleted checkpoints STATE_DELETED (their hold ends), with an event for each and one per trial;
    returns how many rows changed (one already DELETED is left alone)."""
    changed: dict[int, list[str]] = defaultdict(list)
    for d in deleted:
        row = s.get(models.Checkpoint, d.uuid)
        if row is None or row.state == C.DELETED:
            continue
        set_checkpoint_state(s, now, row, C.DELETED, f"deleted by garbage collection ({policy.describe()})")
        row.deleting_by = None
        changed[d.trial_id].append(row.uuid)
    for trial_id, uuids in changed.items():
        record_event(
            s,
            now,
            "trial",
            trial_id,
            f"checkpoint garbage collection deleted {len(uuids)} checkpoint(s) ({policy.describe()}): "
            + ", ".join(uuids),
        )
    return sum(len(u) for u in changed.values())


def experiments_to_sweep(s: Session) -> list[int]:
    """Experiments that have completed checkpoints of ended trials, or checkpoints a collection holds:
    after a master restart a collection that was asked for but not done, or not finished, is found again
    this way."""
    q = (
        select(models.Checkpoint.experiment_id)
        .distinct()
        .join(models.Trial, models.Trial.id == models.Checkpoint.trial_id)
        .where(models.Checkpoint.state == C.COMPLETED, models.Trial.state.in_(sorted(TERMINAL_TRIAL)))
    )
    return sorted({e for e in s.scalars(q) if e is not None} | set(checkpoint_gc_holds.held_experiments(s)))
