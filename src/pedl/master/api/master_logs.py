"""GET /api/v1/master/logs (`det master logs [-f] [--tail N]`): the master's recent log records
(observability/master_logs.py), for admins only: they name users, hosts and paths."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse

from pedl.master.api.deps import INT64_MAX, Caller, caller
from pedl.master.api.ndjson_stream import results
from pedl.master.api.openapi import produces
from pedl.master.identity import require_admin
from pedl.master.observability.master_logs import MasterLogEntry, MasterLogRing
from pedl.master.wire.base import ts

router = APIRouter(prefix="/api/v1")


def entry(e: MasterLogEntry) -> dict[str, Any]:
    """Determined's v1MasterLogsResponse."""
    return {"logEntry": {"id": e.id, "timestamp": ts(e.timestamp), "level": e.level, "message": e.message}}


@router.get("/master/logs")
@produces("application/x-ndjson")
async def master_logs(
    request: Request,
    who: Caller = Depends(caller),
    follow: bool = False,
    offset: int = Query(0, ge=-INT64_MAX, le=INT64_MAX),
    limit: int = Query(0, ge=0, le=INT64_MAX),
) -> StreamingResponse:
    """offset >= 0 skips that many of the records kept, a negative one starts that many from the
    newest (det's --tail); limit 0 is no limit; follow goes on with new records until the client
    leaves."""
    require_admin(who, "read the master's logs")
    ring: MasterLogRing = request.app.state.master_logs

    async def fetch(last: int | None, n: int) -> tuple[list[dict[str, Any]], int | None, bool]:
        got = ring.window(offset, n) if last is None else ring.after(last, n)
        return [entry(e) for e in got], got[-1].id if got else (last if last is not None else ring.last_id()), False

    return StreamingResponse(
        results(fetch, follow=follow, limit=limit, disconnected=request.is_disconnected),
        media_type="application/x-ndjson",
    )
