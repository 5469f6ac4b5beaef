"""Warm start (searcher.source_trial_id / source_checkpoint_uuid): which checkpoint an experiment's
trials start from, resolved once when the experiment is created, as Determined does."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument
from pedl.master.db import models
from pedl.master.lifecycle.states import CheckpointState


def _refuse(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"searcher.{field}: {message}", fields=[{"field": f"searcher.{field}", "message": message}])


def resolve(s: Session, searcher: dict[str, Any]) -> str | None:
    """The uuid of the checkpoint the trials start from, or None without a warm start. A source
    trial gives its latest completed checkpoint; an unknown trial or checkpoint, a trial without a
    completed checkpoint, or a checkpoint not completed (deleted, failed) is a 400 naming the field.
    pedl lets every user read every experiment, so any user may warm start from any trial."""
    trial_id, uuid = searcher.get("source_trial_id"), searcher.get("source_checkpoint_uuid")
    if trial_id is not None:
        trial = s.get(models.Trial, trial_id)
        if trial is None:
            raise _refuse("source_trial_id", f"no trial {trial_id}")
        C = models.Checkpoint
        latest = s.scalar(
            select(C.uuid)
            .where(C.trial_id == trial.id, C.state == CheckpointState.COMPLETED)
            .order_by(C.report_time.desc(), C.steps_completed.desc())
            .limit(1)
        )
        if latest is None:
            raise _refuse("source_trial_id", f"trial {trial_id} has no completed checkpoint to start from")
        return latest
    if uuid is not None:
        checkpoint = s.get(models.Checkpoint, uuid)
        if checkpoint is None:
            raise _refuse("source_checkpoint_uuid", f"no checkpoint {uuid}")
        if checkpoint.state != CheckpointState.COMPLETED:
            raise _refuse(
                "source_checkpoint_uuid",
                f"checkpoint {uuid} is {checkpoint.state.removeprefix('STATE_')}, not COMPLETED",
            )
        return checkpoint.uuid
    return None
