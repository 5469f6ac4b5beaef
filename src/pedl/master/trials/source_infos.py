"""Trial source infos (Determined's core_context.experimental.report_task_using_checkpoint and
report_task_using_model_version): a running trial records that it uses a checkpoint, or a model version
and its checkpoint, so that the SDK's get_metrics of that checkpoint or version reads the trial's reports
(checkpoints/metrics.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument, NotFound
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle.states import DELETING_EXPERIMENT
from pedl.master.lifecycle.task_access import require_task

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

# Determined's v1TrialSourceInfoType names -> what the rows store (its database enum's values)
TYPES = {"TRIAL_SOURCE_INFO_TYPE_INFERENCE": "INFERENCE", "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING": "FINE_TUNING"}
UNSPECIFIED = "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED"
FIELD = "trialSourceInfo"


def stored_type(name: str | None) -> str | None:
    """The stored type a query filters on; None (no filter) for no type or UNSPECIFIED."""
    return None if name in (None, "", UNSPECIFIED) else TYPES[name]


def _checkpoint(s: Session, uuid: str) -> models.Checkpoint:
    ckpt = s.get(models.Checkpoint, uuid) if uuid and len(uuid) <= 64 else None
    if ckpt is None:
        raise NotFound(
            f"{FIELD}.checkpointUuid: checkpoint {uuid} not found",
            fields=[{"field": f"{FIELD}.checkpointUuid", "message": "not found"}],
        )
    exp = s.get(models.Experiment, ckpt.experiment_id) if ckpt.experiment_id else None
    if exp is not None and exp.state in DELETING_EXPERIMENT:
        raise InvalidArgument.at(
            f"{FIELD}.checkpointUuid", f"checkpoint {uuid} belongs to experiment {exp.id}, which is being deleted"
        )
    return ckpt


def _check_version(s: Session, uuid: str, model_id: int | None, version: int | None) -> None:
    """A model version, when named, must exist and be a version of the checkpoint named."""
    if model_id is None and version is None:
        return
    if model_id is None or version is None:
        missing = "modelId" if model_id is None else "modelVersion"
        raise InvalidArgument.at(f"{FIELD}.{missing}", "modelId and modelVersion go together: give both or neither")
    row = s.scalar(
        select(models.ModelVersion).where(
            models.ModelVersion.model_id == model_id, models.ModelVersion.version == version
        )
    )
    if row is None:
        raise NotFound(
            f"{FIELD}.modelVersion: model {model_id} has no version {version}",
            fields=[{"field": f"{FIELD}.modelVersion", "message": "not found"}],
        )
    if row.checkpoint_uuid != uuid:
        raise InvalidArgument.at(
            f"{FIELD}.checkpointUuid",
            f"version {version} of model {model_id} is checkpoint {row.checkpoint_uuid}, not {uuid}",
        )


def _find(s: Session, trial_id: int, uuid: str, kind: str) -> models.TrialSourceInfo | None:
    T = models.TrialSourceInfo
    return s.scalar(select(T).where(T.trial_id == trial_id, T.checkpoint_uuid == uuid, T.type == kind))


def report(
    ctx: MasterContext,
    who: Caller,
    *,
    trial_id: int,
    checkpoint_uuid: str,
    source_type: str,
    model_id: int | None = None,
    model_version: int | None = None,
) -> None:
    """Record that the caller's trial uses the checkpoint (and the model version, when given). Only the
    task token of that trial's live allocation may. Idempotent: one row per (trial, checkpoint, type);
    a model version given again (or another one of the same checkpoint) replaces the one recorded,
    none given keeps it."""
    if source_type not in TYPES:
        raise InvalidArgument.at(f"{FIELD}.trialSourceInfoType", f"{source_type!r} is not one of {sorted(TYPES)}")
    kind = TYPES[source_type]
    with ctx.db.session() as s:
        require_task(s, who, trial_id=trial_id)
        ckpt = _checkpoint(s, checkpoint_uuid)
        _check_version(s, ckpt.uuid, model_id, model_version)
        row = _find(s, trial_id, ckpt.uuid, kind)
        if row is None:
            try:
                with s.begin_nested():  # PostgreSQL: the same report committed meanwhile is no error
                    s.add(
                        models.TrialSourceInfo(
                            trial_id=trial_id,
                            checkpoint_uuid=ckpt.uuid,
                            type=kind,
                            model_id=model_id,
                            model_version=model_version,
                            created_at=ctx.clock.now(),
                        )
                    )
                return
            except IntegrityError:
                row = _find(s, trial_id, ckpt.uuid, kind)
                if row is None:  # not a duplicate: the checkpoint (or trial) was deleted meanwhile
                    raise NotFound(f"{FIELD}.checkpointUuid: checkpoint {checkpoint_uuid} not found") from None
        if model_id is not None:
            row.model_id, row.model_version = model_id, model_version
