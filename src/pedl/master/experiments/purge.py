"""The rows of an experiment being deleted, removed in bounded transactions: every statement deletes at
most BATCH rows and commits, so a large experiment never holds the database (SQLite's write lock) for
long. Children go before their parents; running it again after a failure goes on where it stopped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement, Select, String, cast, delete, select
from sqlalchemy.orm import InstrumentedAttribute

from pedl.master.db import models
from pedl.master.db.base import rowcount
from pedl.master.db.engine import Database

BATCH = 500  # rows per transaction
TRIALS_PER_STEP = 50  # trials whose few keyed rows (digests, marks) one transaction deletes


def _trials(experiment_id: int) -> Select:
    return select(models.Trial.id).where(models.Trial.experiment_id == experiment_id)


def _model_of(column: InstrumentedAttribute[Any]) -> type[models.Base]:
    model = column.class_
    if not (isinstance(model, type) and issubclass(model, models.Base)):
        raise TypeError(f"{column} is not a model's column")
    return model


def _delete_batches(db: Database, key: InstrumentedAttribute[Any], where: Callable[[], ColumnElement[bool]]) -> int:
    """Delete the rows of `key`'s table that match `where`, BATCH at a time, one transaction each. -> rows."""
    total = 0
    while True:
        with db.session() as s:
            doomed = select(key).where(where()).limit(BATCH).scalar_subquery()
            n = rowcount(s.execute(delete(_model_of(key)).where(key.in_(doomed)))) or 0
        total += n
        if n < BATCH:
            return total


def _delete_per_trials(db: Database, experiment_id: int, trial_ids: list[InstrumentedAttribute[int]]) -> None:
    """Tables keyed by (trial_id, ...), by their trial_id: delete theirs TRIALS_PER_STEP trials at a time."""
    after = 0
    while True:
        with db.session() as s:
            ids = list(
                s.scalars(
                    _trials(experiment_id)
                    .where(models.Trial.id > after)
                    .order_by(models.Trial.id)
                    .limit(TRIALS_PER_STEP)
                )
            )
            for trial_id in trial_ids:
                s.execute(delete(_model_of(trial_id)).where(trial_id.in_(ids)))
        if len(ids) < TRIALS_PER_STEP:
            return
        after = ids[-1]


def purge(db: Database, experiment_id: int) -> dict[str, int]:
    """Delete everything of the experiment, its own row last. -> rows deleted per table (those counted)."""
    T, A, C, E = models.Trial, models.Allocation, models.Checkpoint, models.Event
    trials = _trials(experiment_id)
    done: dict[str, int] = {}
    done["metrics"] = _delete_batches(db, models.Metric.id, lambda: models.Metric.trial_id.in_(trials))
    done["metric_digest_resets"] = _delete_batches(
        db, models.MetricDigestReset.id, lambda: models.MetricDigestReset.trial_id.in_(trials)
    )
    _delete_per_trials(db, experiment_id, [models.MetricDigest.trial_id, models.MetricDigestMark.trial_id])
    done["task_logs"] = _delete_batches(db, models.TaskLog.id, lambda: models.TaskLog.trial_id.in_(trials))
    # the trials that reported using a checkpoint: those of its trials, and those naming its checkpoints
    S = models.TrialSourceInfo
    done["trial_source_infos"] = _delete_batches(
        db,
        S.id,
        lambda: (
            S.trial_id.in_(trials)
            | S.checkpoint_uuid.in_(
                select(models.Checkpoint.uuid).where(models.Checkpoint.experiment_id == experiment_id)
            )
        ),
    )
    # events of its trials, allocations and checkpoints, and its own
    allocations = select(A.id).where(A.trial_id.in_(trials))
    checkpoints = select(C.uuid).where(C.experiment_id == experiment_id)
    for kind, ids in (
        ("trial", select(cast(T.id, String)).where(T.experiment_id == experiment_id)),
        ("allocation", allocations),
        ("checkpoint", checkpoints),
    ):
        done[f"{kind} events"] = _delete_batches(
            db, E.id, lambda kind=kind, ids=ids: (E.entity_type == kind) & E.entity_id.in_(ids)
        )
    done["checkpoints"] = _delete_batches(db, C.uuid, lambda: C.experiment_id == experiment_id)
    done["allocations"] = _delete_batches(db, A.id, lambda: A.trial_id.in_(trials))
    done["trials"] = _delete_batches(db, T.id, lambda: T.experiment_id == experiment_id)
    done["experiment events"] = _delete_batches(
        db, E.id, lambda: (E.entity_type == "experiment") & (E.entity_id == str(experiment_id))
    )
    with db.session() as s:
        s.execute(delete(models.ModelDefinition).where(models.ModelDefinition.experiment_id == experiment_id))
        done["experiments"] = (
            rowcount(s.execute(delete(models.Experiment).where(models.Experiment.id == experiment_id))) or 0
        )
    return done
