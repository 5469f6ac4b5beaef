"""How many checkpoints a trial or an experiment has and how many bytes they hold, as Determined
reports them (a trial's checkpointCount and totalCheckpointSize, an experiment's checkpointCount and
checkpointSize): its trials' checkpoints that are not DELETED, each counted at the size of the files
it has left (a partial delete shrinks it). One grouped query for any number of trials or experiments."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import InstrumentedAttribute, Session

from pedl.master.db import models
from pedl.master.lifecycle.states import CheckpointState


@dataclass(frozen=True)
class CheckpointTotals:
    count: int = 0
    size: int = 0  # bytes


NONE = CheckpointTotals()


def _grouped(s: Session, key: InstrumentedAttribute[int | None], ids: Collection[int]) -> dict[int, CheckpointTotals]:
    if not ids:
        return {}
    c = models.Checkpoint
    rows = s.execute(
        select(key, func.count(), func.coalesce(func.sum(c.size_bytes), 0))
        .where(key.in_(sorted(ids)), c.trial_id.is_not(None), c.state != CheckpointState.DELETED)
        .group_by(key)
    )
    return {
        owner: CheckpointTotals(int(n), int(size)) for owner, n, size in rows if owner is not None
    }  # (one of `ids`, never NULL)


def of_trials(s: Session, trial_ids: Collection[int]) -> dict[int, CheckpointTotals]:
    """trial id -> its totals; trials without a checkpoint left are absent."""
    return _grouped(s, models.Checkpoint.trial_id, trial_ids)


def of_experiments(s: Session, experiment_ids: Collection[int]) -> dict[int, CheckpointTotals]:
    """experiment id -> the totals of its trials' checkpoints; experiments without any left are absent."""
    return _grouped(s, models.Checkpoint.experiment_id, experiment_ids)
