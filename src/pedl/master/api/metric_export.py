"""GET /api/v1/trials/{id}/metrics/csv (pedl's own, `pedl trial export-metrics`): a trial's raw metric
reports as a CSV download, streamed a page of reports at a time (metrics/export.py)."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import AsyncIterator, Iterable
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from pedl.master.api.deps import Caller, IdPath, caller, ctx_of
from pedl.master.api.openapi import produces
from pedl.master.metrics import export as metric_export
from pedl.master.wire.base import ts

router = APIRouter(prefix="/api/v1")

FIXED = ["trial_id", "trial_run_id", "group", "steps_completed", "report_time"]
GROUP = Query(
    None,
    min_length=1,
    max_length=64,
    description="the metric group (training, validation or another); none: every group, one after another",
)


def cell(value: Any) -> Any:
    """A metric's CSV cell: a string as stored (the NaN, Infinity and -Infinity reports keep
    among them), a number or boolean as JSON writes it, an object or array as JSON text, a null as
    an empty cell (as is a name the report lacks)."""
    kind = type(value)
    if kind is str or value is None:
        return value
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)  # what json.dumps writes for them, at a fraction of the cost
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def csv_text(rows: Iterable[list[Any]]) -> str:
    out = io.StringIO()
    csv.writer(out).writerows(rows)  # RFC 4180: quoted where needed, CRLF line ends
    return out.getvalue()


def csv_rows(export: metric_export.Export, page: list[tuple[Any, ...]]) -> list[list[Any]]:
    names = export.names
    rows = []
    for trial_run_id, group, steps, report_time, metrics in page:
        values = metrics if isinstance(metrics, dict) else {}
        rows.append(
            [export.trial_id, trial_run_id, group, steps, ts(report_time), *(cell(values.get(name)) for name in names)]
        )
    return rows


def filename(trial_id: int, group: str | None) -> str:
    """trial-<id>-<group or all>-metrics.csv, the group kept to characters safe in any file name."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", group) if group is not None else "all"
    return f"trial-{trial_id}-{safe}-metrics.csv"


@router.get("/trials/{trial_id}/metrics/csv")
@produces("text/csv", errors=(404,))
def export_metrics(
    trial_id: IdPath, request: Request, _: Caller = Depends(caller), group: str | None = GROUP
) -> StreamingResponse:
    """Every report of the trial (of one group, or of all), unsampled: trial_id, trial_run_id, group,
    steps_completed, report_time (RFC 3339, UTC), then a column per metric name the reports hold,
    sorted; groups in name order, each in step order. More than the export's column limit of names
    is a 400 naming the group parameter, answered before anything is sent."""
    ctx = ctx_of(request)
    export = metric_export.plan(ctx, trial_id, group)

    async def stream() -> AsyncIterator[str]:
        yield csv_text([FIXED + export.names])
        pages = metric_export.pages(ctx, export)
        while True:
            page = await run_in_threadpool(next, pages, None)
            if page is None:
                return
            yield csv_text(csv_rows(export, page))

    return StreamingResponse(
        stream(),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename(trial_id, group)}"'},
    )
