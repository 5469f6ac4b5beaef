"""Checkpoints: list, describe, download (a tar stream), and report (from tasks)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field

from pedl.common.checkpoint_storage import storage_from_config
from pedl.errors import InvalidArgument, NotFound
from pedl.master.api import shapes
from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, pagination, parse
from pedl.master.db import models
from pedl.master.services import checkpoint_download
from pedl.master.services import checkpoints as checkpoints_service

router = APIRouter(prefix="/api/v1/checkpoints")


class CheckpointIn(Body):
    uuid: str = Field(..., min_length=1, max_length=64)
    allocationId: str | None = None
    taskId: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] = Field(default_factory=dict)
    state: str = "STATE_COMPLETED"
    training: dict[str, Any] | None = None
    storageId: int | None = None
    reportTime: str | None = None
    storage: dict[str, Any] | None = None


class ReportCheckpointBody(Body):
    checkpoint: CheckpointIn


_STATES = {"STATE_ACTIVE", "STATE_COMPLETED", "STATE_ERROR", "STATE_DELETED", "STATE_PARTIALLY_DELETED"}


@router.post("")
def report(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    data = body if isinstance(body, dict) else {}
    req = parse(ReportCheckpointBody, data if "checkpoint" in data else {"checkpoint": data})
    ck = req.checkpoint
    if ck.state not in _STATES:
        raise InvalidArgument(f"checkpoint.state: {ck.state!r} is not one of {sorted(_STATES)}",
                              fields=[{"field": "checkpoint.state", "message": "invalid state"}])
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        alloc_id = who.allocation_id or ck.allocationId
        alloc = s.get(models.Allocation, alloc_id) if alloc_id else None
        trial = s.get(models.Trial, alloc.trial_id) if alloc and alloc.trial_id else None
        if trial is None and ck.training and ck.training.get("trialId"):
            trial_id = ck.training["trialId"]
            if not isinstance(trial_id, int) or isinstance(trial_id, bool):
                raise InvalidArgument("checkpoint.training.trialId: must be an integer",
                                      fields=[{"field": "checkpoint.training.trialId", "message": "not an integer"}])
            trial = s.get(models.Trial, trial_id)
        exp = s.get(models.Experiment, trial.experiment_id) if trial else None
        storage = ck.storage or (exp.config.get("checkpoint_storage", {}) if exp else {})
        row = checkpoints_service.record(s, uuid=ck.uuid, trial=trial, alloc_id=alloc_id,
                                         task_id=ck.taskId or (alloc.task_id if alloc else None),
                                         report_time=ctx.clock.now(), metadata=ck.metadata,
                                         resources=ck.resources, storage=storage, state=ck.state)
        return {"checkpoint": shapes.checkpoint(row, exp, trial, None)}


@router.get("/{uuid}")
def describe(uuid: str, request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        c = checkpoints_service.get(s, uuid)
        trial = s.get(models.Trial, c.trial_id) if c.trial_id else None
        exp = s.get(models.Experiment, c.experiment_id) if c.experiment_id else None
        validation = checkpoints_service.validation_metrics_at(s, c.trial_id, c.steps_completed) if c.trial_id else None
        return {"checkpoint": shapes.checkpoint(c, exp, trial, validation)}


@router.get("")
def list_checkpoints(request: Request, _: Caller = Depends(caller), experimentId: int | None = None,
                     trialId: int | None = None, states: list[str] = Query(default_factory=list),
                     offset: int = Query(0, ge=0), limit: int = Query(0, ge=0), orderBy: str | None = None) -> dict:
    """pedl's own listing (det has none across experiments): filter by experiment, trial and state."""
    bad = [st for st in states if st not in _STATES]
    if bad:
        raise InvalidArgument(f"states: {bad[0]!r} is not one of {sorted(_STATES)}",
                              fields=[{"field": "states", "message": "invalid state"}])
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        rows, total = checkpoints_service.list_page(s, experiment_id=experimentId, trial_id=trialId, states=states,
                                                    offset=offset, limit=limit,
                                                    newest_first=orderBy == "ORDER_BY_DESC")
        out = [shapes.checkpoint(*row) for row in checkpoints_service.with_training(s, rows)]
        return {"checkpoints": out, "pagination": pagination(offset, limit, total, len(rows))}


@router.get("/{uuid}/download")
def download(uuid: str, request: Request, _: Caller = Depends(caller)) -> StreamingResponse:
    """The checkpoint's files as an uncompressed tar, streamed from its storage (shared_fs or s3)."""
    ctx = ctx_of(request)
    with ctx.db.session() as s:
        c = checkpoints_service.get(s, uuid)
        exp = s.get(models.Experiment, c.experiment_id) if c.experiment_id else None
        config = c.storage or (exp.config.get("checkpoint_storage") if exp else None) or \
            ctx.config.effective_checkpoint_storage().model_dump(mode="json")
        state, report_time = c.state, c.report_time
    if state == "STATE_DELETED":
        raise NotFound(f"checkpoint {uuid} was deleted (STATE_DELETED); its files are gone")
    storage = storage_from_config(config)
    resources = storage.resources(uuid)  # before the first byte, so storage errors get a proper status
    if not resources:
        raise NotFound(f"checkpoint {uuid} has no files in {storage!r}")
    tar = checkpoint_download.plan_tar(resources, report_time)
    return StreamingResponse(checkpoint_download.tar_stream(storage, uuid, tar), media_type="application/x-tar",
                             headers={"Content-Length": str(tar.length),
                                      "Content-Disposition": f'attachment; filename="{uuid}.tar"',
                                      "X-Pedl-Checkpoint-Bytes": str(tar.file_bytes)})
