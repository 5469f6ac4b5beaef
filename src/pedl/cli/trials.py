"""`pedl trial describe ID` and `pedl trial logs ID [-f] [--tail N]` over /api/v1/trials/{id}.
Logs print as they arrive; with --tail and -f, following starts after the last line shown."""

from __future__ import annotations

from typing import Any

import typer

from pedl.cli.log_stream import LinePrinter, log_id, stream_trial_logs, tail_trial_logs
from pedl.cli.output import JsonFlag, fmt_state, fmt_time, print_fields, print_json, print_table
from pedl.cli.state import client_of
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Inspect trials and their logs.")


def _metrics(workload: dict[str, Any] | None) -> Any:
    metrics = (workload or {}).get("metrics") or {}
    return metrics.get("avgMetrics", metrics) if isinstance(metrics, dict) else metrics


@app.command("describe")
def describe(ctx: typer.Context, trial_id: int, as_json: JsonFlag = False) -> None:
    """Show a trial: state, hyperparameters, progress, metrics, checkpoint."""
    client = client_of(ctx)
    trial = client.get(f"/api/v1/trials/{trial_id}").get("trial") or {}
    try:
        workloads = client.paginate(f"/api/v1/trials/{trial_id}/workloads", "workloads",
                                    {"includeBatchMetrics": False}, page_size=1000)
    except NotFound:
        workloads = []
    if as_json:
        print_json({"trial": trial, "workloads": workloads})
        return
    print_fields([
        ("ID", trial.get("id")), ("Experiment", trial.get("experimentId")),
        ("State", fmt_state(trial.get("state"))),
        *([("Waiting because", trial["waitReason"])] if trial.get("waitReason") else []),
        ("Hyperparameters", trial.get("hparams")),
        ("Started", fmt_time(trial.get("startTime"))), ("Ended", fmt_time(trial.get("endTime"))),
        ("Restarts", trial.get("restarts")), ("Batches", trial.get("totalBatchesProcessed")),
        ("Best validation", _metrics(trial.get("bestValidation"))),
        ("Latest validation", _metrics(trial.get("latestValidation"))),
        ("Best checkpoint", (trial.get("bestCheckpoint") or {}).get("uuid")),
        ("Summary metrics", trial.get("summaryMetrics")),
    ], title=f"Trial {trial_id}")
    if workloads:
        rows = []
        for w in workloads:
            kind, body = next(((k, v) for k, v in w.items() if isinstance(v, dict)), ("", {}))
            rows.append([kind, body.get("totalBatches"), fmt_state(body.get("state")),
                         fmt_time(body.get("endTime")), _metrics(body) or body.get("uuid")])
        print_table(["Workload", "Batches", "State", "Ended", "Metrics / checkpoint"], rows,
                    title="Workloads")


@app.command("logs")
def logs(
    ctx: typer.Context,
    trial_id: int,
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing until the trial ends"),
    tail: int | None = typer.Option(None, "--tail", min=0, help="only the last N lines"),
) -> None:
    """Print a trial's logs (GET /api/v1/trials/{id}/logs, newline-delimited JSON)."""
    client = client_of(ctx)
    printer = LinePrinter()
    after: int | None = None
    if tail is not None:
        records = tail_trial_logs(client, trial_id, tail)
        for record in records[-tail:] if tail else []:
            printer.log(record)
        ids = [i for i in (log_id(r) for r in records) if i is not None]
        after = max(ids) if ids else None
        if not follow:
            return
    stream_trial_logs(client, trial_id, printer.log, follow=follow, after_id=after)
