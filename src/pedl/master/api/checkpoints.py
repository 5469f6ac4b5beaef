"""Checkpoints: list, describe, download (a tar stream), report (from tasks); their metric reports, metadata,
delete and file removal (Determined's SDK and det checkpoint delete|rm)."""

from __future__ import annotations

import uuid as uuid_lib
import zlib
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from pedl.config.storable_values import INT64_MAX
from pedl.errors import InvalidArgument
from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.openapi import accepts, produces
from pedl.master.api.trial_source_infos import MetricGroupQuery, SourceTypeQuery, reports_response
from pedl.master.checkpoints import edits as checkpoint_edits
from pedl.master.checkpoints import is_path_component
from pedl.master.checkpoints import metrics as checkpoint_metrics
from pedl.master.checkpoints import service as checkpoints_service
from pedl.master.wire.base import Pagination
from pedl.master.wire.checkpoint import (
    CheckpointsRemoveFilesResponse,
    DeleteCheckpointsResponse,
    GetCheckpointResponse,
    GetCheckpointsResponse,
    PostCheckpointMetadataResponse,
    ReportCheckpointResponse,
)

router = APIRouter(prefix="/api/v1/checkpoints")
# Determined's master also serves a checkpoint as a gzipped tar at /checkpoints/{uuid}, outside /api/v1
# (det checkpoint download --mode master, the SDK's download(mode=MASTER))
legacy_router = APIRouter()


_STATES = {"STATE_ACTIVE", "STATE_COMPLETED", "STATE_ERROR", "STATE_DELETED", "STATE_PARTIALLY_DELETED"}


class CheckpointIn(Body):
    """What a task reports (Determined's v1Checkpoint). The location of the files is never part of
    it: they are where the experiment's checkpoint_storage says."""

    uuid: str = Field(..., max_length=64)
    allocationId: str | None = None
    taskId: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    resources: dict[str, Any] = Field(default_factory=dict)
    state: str = "STATE_COMPLETED"
    training: dict[str, Any] | None = None
    storageId: int | None = None
    reportTime: str | None = None
    storage: SkipJsonSchema[Any] = None  # refused when given; declared so the refusal names the field

    @field_validator("uuid")
    @classmethod
    def _uuid(cls, value: str) -> str:
        # the uuid names the checkpoint's directory: only a real UUID, in its canonical form
        try:
            return str(uuid_lib.UUID(value))
        except ValueError:
            raise ValueError(f"{value!r} is not a UUID") from None

    @field_validator("resources")
    @classmethod
    def _resources(cls, value: dict[str, Any]) -> dict[str, int]:
        out = {}
        for path, size in value.items():
            parts = path[:-1].split("/") if path.endswith("/") else path.split("/")
            if not all(is_path_component(p) for p in parts):
                raise ValueError(f"{path!r} is not a relative path inside the checkpoint")
            if isinstance(size, str) and size.isascii() and size.isdigit():
                size = int(size)
            if isinstance(size, bool) or not isinstance(size, int) or not 0 <= size <= INT64_MAX:
                raise ValueError(f"the size of {path!r} must be a non-negative integer (bytes), not {size!r}")
            out[path] = size
        return out

    @field_validator("state")
    @classmethod
    def _state(cls, value: str) -> str:
        if value not in _STATES:
            raise ValueError(f"{value!r} is not one of {sorted(_STATES)}")
        return value

    @field_validator("metadata")
    @classmethod
    def _metadata(cls, value: dict[str, Any]) -> dict[str, Any]:
        steps = value.get("steps_completed", 0)
        if isinstance(steps, str) and steps.isascii() and steps.isdigit():
            steps = int(steps)
        if isinstance(steps, bool) or not isinstance(steps, int) or not 0 <= steps <= INT64_MAX:
            raise ValueError(f"steps_completed must be a non-negative integer, not {steps!r}")
        return value

    @field_validator("training")
    @classmethod
    def _training(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        trial_id = (value or {}).get("trialId")
        if trial_id is not None and (
            isinstance(trial_id, bool) or not isinstance(trial_id, int) or not 0 < trial_id <= INT64_MAX
        ):
            raise ValueError(f"trialId must be a trial id (a positive integer), not {trial_id!r}")
        return value

    @field_validator("storage")
    @classmethod
    def _storage(cls, value: Any) -> None:
        if value is not None:
            raise ValueError("not accepted: a checkpoint's files are where its experiment's checkpoint_storage says")
        return None


class ReportCheckpointBody(Body):
    checkpoint: CheckpointIn


@router.post("", response_model=ReportCheckpointResponse, response_model_exclude_unset=True)
@accepts(ReportCheckpointBody)
def report(
    request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> ReportCheckpointResponse:
    """A trial reports a checkpoint it stored; only its own task token may."""
    data = body if isinstance(body, dict) else {}
    ck = parse(ReportCheckpointBody, data if "checkpoint" in data else {"checkpoint": data}).checkpoint
    shown = checkpoints_service.report(
        ctx_of(request),
        who,
        uuid=ck.uuid,
        metadata=ck.metadata,
        resources=ck.resources,
        state=ck.state,
        trial_id=(ck.training or {}).get("trialId"),
        allocation_id=ck.allocationId or None,
        task_id=ck.taskId or None,
    )
    return ReportCheckpointResponse(checkpoint=shown)


@router.get("/{uuid}", response_model=GetCheckpointResponse, response_model_exclude_unset=True)
def describe(uuid: str, request: Request, _: Caller = Depends(caller)) -> GetCheckpointResponse:
    return GetCheckpointResponse(checkpoint=checkpoints_service.describe(ctx_of(request), uuid))


@router.get("", response_model=GetCheckpointsResponse, response_model_exclude_unset=True)
def list_checkpoints(
    request: Request,
    _: Caller = Depends(caller),
    experimentId: int | None = None,
    trialId: int | None = None,
    states: list[str] = Query(default_factory=list),
    offset: int = Query(0, ge=0, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
    orderBy: str | None = None,
) -> GetCheckpointsResponse:
    """pedl's own listing (det has none across experiments): filter by experiment, trial and state."""
    bad = [st for st in states if st not in _STATES]
    if bad:
        raise InvalidArgument(
            f"states: {bad[0]!r} is not one of {sorted(_STATES)}",
            fields=[{"field": "states", "message": "invalid state"}],
        )
    page = checkpoints_service.listing(
        ctx_of(request),
        experiment_id=experimentId,
        trial_id=trialId,
        states=states,
        offset=offset,
        limit=limit,
        newest_first=orderBy == "ORDER_BY_DESC",
    )
    return GetCheckpointsResponse(
        checkpoints=page.items, pagination=Pagination.of(offset, limit, page.total, len(page.items))
    )


@router.get("/{uuid}/download")
@produces("application/x-tar", errors=(404,))
def download(uuid: str, request: Request, _: Caller = Depends(caller)) -> StreamingResponse:
    """The checkpoint's files as an uncompressed tar, streamed from its storage (shared_fs or s3),
    only from inside the master's checkpoint storage roots."""
    got = checkpoints_service.download(ctx_of(request), uuid)
    return StreamingResponse(
        got.chunks,
        media_type="application/x-tar",
        headers={
            "Content-Length": str(got.length),
            "Content-Disposition": f'attachment; filename="{got.uuid}.tar"',
            "X-Pedl-Checkpoint-Bytes": str(got.file_bytes),
        },
    )


@legacy_router.get("/checkpoints/{uuid}")
@produces("application/gzip", errors=(404,))
def download_gzipped(uuid: str, request: Request, _: Caller = Depends(caller)) -> StreamingResponse:
    """The tar of /api/v1/checkpoints/{uuid}/download, gzipped as it streams."""
    got = checkpoints_service.download(ctx_of(request), uuid)
    return StreamingResponse(
        _gzipped(got.chunks),
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="{got.uuid}.tar.gz"'},
    )


def _gzipped(chunks: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 31: the gzip format
    for chunk in chunks:
        if out := packer.compress(chunk):
            yield out
    yield packer.flush()


# -- what users change (Determined's SDK: add_metadata, remove_metadata, delete, remove_files) -------


class CheckpointMetadataIn(Body):
    """The SDK's v1Checkpoint of PostCheckpointMetadata: only uuid and metadata are read."""

    uuid: str | None = Field(None, max_length=64)
    metadata: dict[str, Any]


class PostCheckpointMetadataBody(Body):
    checkpoint: CheckpointMetadataIn


class DeleteCheckpointsBody(Body):
    checkpointUuids: list[str]


class CheckpointsRemoveFilesBody(Body):
    checkpointUuids: list[str]
    checkpointGlobs: list[str] = Field(default_factory=list)


@router.post("/{uuid}/metadata", response_model=PostCheckpointMetadataResponse, response_model_exclude_unset=True)
@accepts(PostCheckpointMetadataBody)
def post_metadata(
    uuid: str, request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> PostCheckpointMetadataResponse:
    """The checkpoint's new metadata, whole (the SDK merges or removes keys itself); its experiment's
    owner or an admin."""
    req = parse(PostCheckpointMetadataBody, body).checkpoint
    if req.uuid and req.uuid != uuid:
        raise InvalidArgument.at("checkpoint.uuid", f"{req.uuid!r} is not the checkpoint of the path ({uuid})")
    return PostCheckpointMetadataResponse(
        checkpoint=checkpoint_edits.set_metadata(ctx_of(request), who, uuid, req.metadata)
    )


@router.delete("", response_model=DeleteCheckpointsResponse, response_model_exclude_unset=True)
@accepts(DeleteCheckpointsBody, errors=(404, 503))  # an unknown uuid; storage that failed
def delete_checkpoints(
    request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> DeleteCheckpointsResponse:
    """det checkpoint delete, the SDK's checkpoint.delete(): the files go, the checkpoints are
    STATE_DELETED when this answers."""
    req = parse(DeleteCheckpointsBody, body)
    checkpoint_edits.delete(ctx_of(request), who, req.checkpointUuids)
    return DeleteCheckpointsResponse()


@router.post("/rm", response_model=CheckpointsRemoveFilesResponse, response_model_exclude_unset=True)
@accepts(CheckpointsRemoveFilesBody, errors=(404, 503))
def remove_files(
    request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)
) -> CheckpointsRemoveFilesResponse:
    """det checkpoint rm, the SDK's remove_files(globs): the files the globs name go; the checkpoint is
    PARTIALLY_DELETED with the files left (DELETED with none). No globs: what storage holds is read again."""
    req = parse(CheckpointsRemoveFilesBody, body)
    checkpoint_edits.remove_files(ctx_of(request), who, req.checkpointUuids, req.checkpointGlobs)
    return CheckpointsRemoveFilesResponse()


@router.get("/{uuid}/metrics")
def metrics(
    uuid: str,
    request: Request,
    _: Caller = Depends(caller),
    metricGroup: MetricGroupQuery = None,
    trialSourceInfoType: SourceTypeQuery = None,
) -> StreamingResponse:
    """The SDK's checkpoint.get_metrics(group): the reports of the trials that reported using the
    checkpoint (report_task_using_checkpoint), not of the trial that took it."""
    ctx = ctx_of(request)
    linked = checkpoint_metrics.of_checkpoint(ctx, uuid, trialSourceInfoType)
    return reports_response(checkpoint_metrics.pages(ctx, linked, metricGroup or None), metricGroup or None)
