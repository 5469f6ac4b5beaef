"""A checkpoint leaves COMPLETED before anything deletes its files: `hold` makes it PARTIALLY_DELETED (a
state det 0.38.1 reads) and names what deletes it in `deleting_by`; download refuses it meanwhile.

What deletes it: a checkpoint GC task (its id), the GC worker on the master (BY_MASTER_GC) or a user's
request on the master (BY_REQUEST). Marking the outcome (checkpoint_gc.mark_deleted, checkpoint_edits.
mark_left) ends the hold. A deletion that ends unfinished leaves the checkpoint PARTIALLY_DELETED, since
which of its files are gone is unknown: a collection's are deleted again by the GC worker (checkpoint_gc.unfinished),
a user's request's are released (`release`) for the user to ask again."""

from __future__ import annotations

from collections.abc import Collection, Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.master.db import models
from pedl.master.lifecycle.states import CheckpointState
from pedl.master.lifecycle.transitions import record_event, set_checkpoint_state

C = CheckpointState
BY_MASTER_GC = "master:gc"  # the GC worker deletes on the master (S3, or no agent up)
BY_REQUEST = "master:request"  # a user's delete or file removal, done on the master while the request waits


def deleter(by: str) -> str:
    """What `by` names, for messages."""
    if by == BY_MASTER_GC:
        return "the master's checkpoint garbage collection"
    if by == BY_REQUEST:
        return "the master, for a user's request"
    return f"checkpoint GC task {by}"


def not_served(row: models.Checkpoint) -> str | None:
    """Why download refuses the checkpoint now (None: it may be served)."""
    if row.deleting_by is None:
        return None
    return (
        f"checkpoint {row.uuid} is being deleted by {deleter(row.deleting_by)} ({row.state}): its files are not served"
    )


def hold(s: Session, now: float, uuids: Collection[str], by: str, what: str) -> list[str]:
    """Take the checkpoints out of COMPLETED (-> PARTIALLY_DELETED, `deleting_by` = `by`) in the caller's
    transaction, before their files are touched; returns those held. A DELETED one, or one registered as a
    model version, is not held (and must not be touched). Each experiment's row is locked first, as a model
    version's registration locks it (model_versions._registrable), so either sees the other's commit."""
    if not uuids:
        return []
    ck = models.Checkpoint
    rows = list(s.scalars(select(ck).where(ck.uuid.in_(sorted(uuids))).order_by(ck.uuid)))
    for experiment_id in sorted({r.experiment_id for r in rows if r.experiment_id is not None}):
        s.get(models.Experiment, experiment_id, with_for_update=True)
    registered = set(
        s.scalars(
            select(models.ModelVersion.checkpoint_uuid).where(models.ModelVersion.checkpoint_uuid.in_(sorted(uuids)))
        )
    )
    held, trials = [], set()
    reason = f"its files are being {what} by {deleter(by)}; it is not served meanwhile"
    for row in rows:
        if row.state == C.DELETED or row.uuid in registered:
            continue
        if not set_checkpoint_state(s, now, row, C.PARTIALLY_DELETED, reason):
            record_event(s, now, "checkpoint", row.uuid, reason)
        row.deleting_by = by
        held.append(row.uuid)
        if row.trial_id is not None:
            trials.add(row.trial_id)
    repoint_latest(s, trials)
    return held


def release(s: Session, now: float, uuids: Iterable[str], why: str) -> list[str]:
    """End the hold of those still held (they stay PARTIALLY_DELETED: some files may be gone); -> released."""
    out = []
    for uuid in uuids:
        row = s.get(models.Checkpoint, uuid)
        if row is None or row.deleting_by is None:
            continue
        row.deleting_by = None
        record_event(
            s,
            now,
            "checkpoint",
            uuid,
            f"{why}; it stays {row.state}, as some of its files may be gone",
            level="warning",
        )
        out.append(uuid)
    return out


def held_experiments(s: Session) -> list[int]:
    """Experiments with checkpoints held by the GC worker or a collection's task (a sweep looks at them)."""
    ck = models.Checkpoint
    ids = s.scalars(
        select(ck.experiment_id).distinct().where(ck.deleting_by.is_not(None), ck.deleting_by != BY_REQUEST)
    )
    return sorted(e for e in ids if e is not None)


def release_requests(s: Session, now: float) -> list[str]:
    """At start: a user's request that held checkpoints on the master did not finish (the master stopped)."""
    ck = models.Checkpoint
    uuids = list(s.scalars(select(ck.uuid).where(ck.deleting_by == BY_REQUEST)))
    return release(s, now, uuids, "the master stopped while a user's request deleted its files")


def repoint_latest(s: Session, trial_ids: Collection[int]) -> None:
    """A trial whose latest checkpoint is no longer COMPLETED resumes from its newest one that is."""
    if not trial_ids:
        return
    s.flush()
    ck = models.Checkpoint
    for trial in s.scalars(select(models.Trial).where(models.Trial.id.in_(sorted(trial_ids)))):
        latest = s.get(ck, trial.latest_checkpoint) if trial.latest_checkpoint else None
        if latest is None or latest.state == C.COMPLETED:
            continue
        trial.latest_checkpoint = s.scalar(
            select(ck.uuid)
            .where(ck.trial_id == trial.id, ck.state == C.COMPLETED)
            .order_by(ck.steps_completed.desc(), ck.report_time.desc())
            .limit(1)
        )
