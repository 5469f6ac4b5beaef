"""`pedl task list`: the master's allocations (GET /api/v1/tasks -> allocationIdToSummary), and
`pedl task logs ID [-f] [--tail N]` (GET /api/v1/tasks/{id}/logs). Also maps container ids to
allocations for `pedl slot list`."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import typer

from pedl.cli.client import MasterClient
from pedl.cli.log_stream import LinePrinter, log_id
from pedl.cli.output import JsonFlag, fmt_state, fmt_time, print_json, print_table
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="List tasks (allocations).")


def allocation_summaries(client: MasterClient) -> dict[str, dict[str, Any]]:
    return client.get("/api/v1/tasks").get("allocationIdToSummary") or {}


def allocations_by_container(summaries: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    by_container = {}
    for summary in summaries.values():
        for res in summary.get("resources") or []:
            if isinstance(res, dict) and res.get("containerId"):
                by_container[res["containerId"]] = summary
    return by_container


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List allocations with their task, slots and resource pool."""
    summaries = allocation_summaries(client_of(ctx))
    if as_json:
        print_json(summaries)
        return
    rows = [
        [
            s.get("taskId"),
            aid,
            s.get("name"),
            fmt_state(s.get("state")),
            s.get("slotsNeeded"),
            s.get("resourcePool"),
            fmt_time(s.get("registeredTime")),
            s.get("priority"),
            s.get("waitReason") or "",
        ]
        for aid, s in sorted(summaries.items(), key=lambda kv: kv[1].get("registeredTime") or "")
    ]
    print_table(
        [
            "Task ID",
            "Allocation ID",
            "Name",
            "State",
            "Slots needed",
            "Resource pool",
            "Registered",
            "Priority",
            "Waiting because",
        ],
        rows,
    )


@app.command("logs")
def logs(
    ctx: typer.Context,
    task_id: str = typer.Argument(..., help="the task, as `pedl task list` shows it"),
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing until the task ends"),
    tail: int | None = typer.Option(None, "--tail", min=0, help="only the last N lines"),
) -> None:
    """Print a task's logs (newline-delimited JSON from GET /api/v1/tasks/{id}/logs)."""
    client = client_of(ctx)
    path = f"/api/v1/tasks/{quote(task_id, safe='')}/logs"
    printer = LinePrinter()
    last: int | None = None
    if tail is not None:  # the newest N, as det asks for them, printed oldest first
        records = list(
            client.stream_ndjson(path, {"follow": False, "limit": max(tail, 1), "orderBy": "ORDER_BY_DESC"})
        )[::-1]
        for record in records[-tail:] if tail else []:
            printer.log(record)
        last = max((i for i in (log_id(r) for r in records) if i is not None), default=None)
        if not follow:
            return
    for record in client.stream_ndjson(path, {"follow": follow}):
        rid = log_id(record)
        if last is not None and rid is not None and rid <= last:
            continue
        printer.log(record)
