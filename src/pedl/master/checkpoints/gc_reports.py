"""What a checkpoint GC task reports (POST /api/v1/allocations/{id}/checkpoint_gc): what each of its
checkpoints has left after its deletions. Only that allocation's task token, while it lives, and only the
checkpoints the master gave that task; the rows are marked as the master-side path marks them
(checkpoint_gc.mark_deleted for a collection, checkpoint_edits.mark_left for a user's request), so the
totals, events and the trial's latest checkpoint follow, and a row already DELETED is left alone."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session

from pedl.errors import Forbidden, InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.checkpoints.deletion import Deletion
from pedl.master.checkpoints.edits import mark_left
from pedl.master.checkpoints.gc import mark_deleted
from pedl.master.checkpoints.retention import RetentionPolicy
from pedl.master.db import models
from pedl.master.lifecycle.checkpoint_gc_task_rows import KIND, ORIGIN_GC, SECRET, secret_of
from pedl.master.lifecycle.task_access import require_task

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

Left = Mapping[str, Mapping[str, int]]  # uuid -> relative path -> size


def report(ctx: MasterContext, who: Caller, allocation_id: str, left: list[tuple[str, dict[str, int]]]) -> int:
    """Mark the rows of what the task reports (`left`: (uuid, its listing) in the body's order); returns
    how many it named. Every problem is refused before anything is marked."""

    def work(s: Session) -> int:
        alloc = require_task(s, who, allocation_id=allocation_id)
        task = s.get(models.GenericTask, alloc.task_id) if alloc.trial_id is None else None
        if task is None or task.kind != KIND:
            raise Forbidden(f"allocation {allocation_id} is no checkpoint GC task's")
        secret = secret_of(task)
        given = set(secret.get("uuids") or [])
        for i, (uuid, _) in enumerate(left):
            if uuid not in given:
                raise Forbidden(
                    f"checkpoints[{i}].uuid: checkpoint {uuid} was not given to this task",
                    fields=[{"field": f"checkpoints[{i}].uuid", "message": "not given to this task"}],
                )
        by_uuid = dict(left)
        if len(by_uuid) != len(left):
            raise InvalidArgument.at("checkpoints", "names a checkpoint twice")
        _mark(s, ctx.clock.now(), task.experiment_ids[0], secret, by_uuid)
        # a collection's checkpoint with files left stays held: its collection failed (checkpoint_gc_task_rows.outcome)
        unfinished = {u for u, files in by_uuid.items() if files} if secret.get("origin") == ORIGIN_GC else set()
        unfinished |= set(secret.get("unfinished") or []) - set(by_uuid)
        task.secrets = {
            **(task.secrets or {}),
            SECRET: {
                **secret,
                "reported": sorted({*secret.get("reported", []), *by_uuid}),
                "unfinished": sorted(unfinished),
            },
        }
        return len(by_uuid)

    return ctx.controller.run(work)


def _mark(s: Session, now: float, experiment_id: int, secret: Mapping, left: Left) -> None:
    if secret.get("origin") != ORIGIN_GC:
        mark_left(
            s, now, left, f"{secret.get('what') or 'deleted'} by {secret.get('by') or 'a user'} (checkpoint GC task)"
        )
        return
    # a collection deletes whole checkpoints: one with something left (files it could not delete) stays held,
    # PARTIALLY_DELETED, and is deleted again (checkpoint_gc.unfinished)
    gone = [uuid for uuid, files in left.items() if not files]
    rows = {r.uuid: r for r in (s.get(models.Checkpoint, u) for u in gone) if r is not None}
    mark_deleted(
        s,
        now,
        experiment_id,
        RetentionPolicy(**(secret.get("policy") or {})),
        [Deletion(u, rows[u].trial_id or 0, {}) for u in gone if u in rows],
    )
