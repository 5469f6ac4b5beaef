"""What a checkpoint GC task reports: POST /api/v1/allocations/{allocation_id}/checkpoint_gc with
{"checkpoints": [{"uuid", "resources": {path: size}}]}, what each of its checkpoints has left
(checkpoints/gc_reports.py). Only that allocation's own task token, while it lives."""

from __future__ import annotations

import uuid as uuid_lib
from typing import Any

from fastapi import APIRouter, Depends, Request
from pydantic import Field, field_validator

from pedl.config.storable_values import INT64_MAX
from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.checkpoints import MAX_PER_TASK
from pedl.master.checkpoints import gc_reports as checkpoint_gc_reports

router = APIRouter(prefix="/api/v1")
MAX_REPORTED = MAX_PER_TASK  # the most checkpoints one GC task is given


class CheckpointLeft(Body):
    uuid: str = Field(..., max_length=64)
    resources: dict[str, int] = Field(default_factory=dict)

    @field_validator("uuid")
    @classmethod
    def _uuid(cls, value: str) -> str:
        try:
            return str(uuid_lib.UUID(value))
        except ValueError:
            raise ValueError("must be a checkpoint UUID") from None

    @field_validator("resources")
    @classmethod
    def _sizes(cls, value: dict[str, int]) -> dict[str, int]:
        for path, size in value.items():
            if not path or len(path) > 4096:
                raise ValueError("each path must be 1 to 4096 characters")
            if not 0 <= size <= INT64_MAX:
                raise ValueError(f"the size of {path!r} must be from 0 to {INT64_MAX}")
        return value


class CheckpointGCReport(Body):
    checkpoints: list[CheckpointLeft] = Field(..., max_length=MAX_REPORTED)


@router.post("/allocations/{allocation_id}/checkpoint_gc")
def report_checkpoint_gc(
    allocation_id: str, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> dict:
    """What each of the GC task's checkpoints has left after its deletions; the master marks them."""
    report = parse(CheckpointGCReport, body)
    checkpoint_gc_reports.report(
        ctx_of(request), who, allocation_id, [(c.uuid, dict(c.resources)) for c in report.checkpoints]
    )
    return {}
