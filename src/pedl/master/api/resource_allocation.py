"""GET /api/v1/resources/allocation/raw: Determined's ResourceAllocationRaw (det resources raw --json)."""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Query, Request

from pedl.errors import InvalidArgument
from pedl.master.agents import resource_allocation
from pedl.master.api.deps import Caller, caller, ctx_of
from pedl.master.wire.base import ts

router = APIRouter(prefix="/api/v1")


@router.get("/resources/allocation/raw")
def allocation_raw(
    request: Request,
    who: Caller = Depends(caller),
    timestamp_after: str | None = Query(None, alias="timestampAfter", max_length=64),
    timestamp_before: str | None = Query(None, alias="timestampBefore", max_length=64),
    after_snake: str | None = Query(None, alias="timestamp_after", max_length=64),
    before_snake: str | None = Query(None, alias="timestamp_before", max_length=64),
) -> dict:
    """The window's bounds as Determined's gateway takes them, camelCase or (det resources raw) snake_case."""
    after = _time("timestampAfter", timestamp_after or after_snake)
    before = _time("timestampBefore", timestamp_before or before_snake)
    entries = resource_allocation.raw(ctx_of(request), who, after, before)
    return {
        "resourceEntries": [
            {
                "startTime": ts(e.start),
                "endTime": ts(e.end),
                "kind": "TRIAL",
                "seconds": e.seconds,
                "slots": e.slots,
                "experimentId": e.experiment_id,
                "userId": e.user_id,
                "username": e.username,
                "labels": e.labels,
            }
            for e in entries
        ]
    }


def _time(name: str, value: str | None) -> float:
    if not value:
        raise InvalidArgument.at(name, "required: an RFC 3339 time, such as 2021-10-26T23:17:12Z")
    try:
        when = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument.at(name, "an RFC 3339 time, such as 2021-10-26T23:17:12Z") from None
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()  # no offset: UTC
