"""`pedl trial describe ID`, `pedl trial logs ID [-f] [--tail N]`, `pedl trial download ID
--best|--latest` and `pedl trial export-metrics ID` over /api/v1/trials/{id}. Logs print as they
arrive; with --tail and -f, following starts after the last line shown."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pedl.cli.checkpoint_download import download_checkpoint, file_bytes
from pedl.cli.log_stream import LinePrinter, log_id, stream_trial_logs, tail_trial_logs
from pedl.cli.metric_export import export_metrics
from pedl.cli.output import JsonFlag, fail, fmt_bytes, fmt_state, fmt_time, print_fields, print_json, print_table, say
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
        workloads = client.paginate(
            f"/api/v1/trials/{trial_id}/workloads", "workloads", {"includeBatchMetrics": False}, page_size=1000
        )
    except NotFound:
        workloads = []
    if as_json:
        print_json({"trial": trial, "workloads": workloads})
        return
    print_fields(
        [
            ("ID", trial.get("id")),
            ("Experiment", trial.get("experimentId")),
            ("State", fmt_state(trial.get("state"))),
            *([("Waiting because", trial["waitReason"])] if trial.get("waitReason") else []),
            ("Hyperparameters", trial.get("hparams")),
            ("Started", fmt_time(trial.get("startTime"))),
            ("Ended", fmt_time(trial.get("endTime"))),
            ("Restarts", trial.get("restarts")),
            ("Batches", trial.get("totalBatchesProcessed")),
            ("Best validation", _metrics(trial.get("bestValidation"))),
            ("Latest validation", _metrics(trial.get("latestValidation"))),
            ("Best checkpoint", (trial.get("bestCheckpoint") or {}).get("uuid")),
            ("Summary metrics", trial.get("summaryMetrics")),
        ],
        title=f"Trial {trial_id}",
    )
    if workloads:
        rows = []
        for w in workloads:
            kind, body = next(((k, v) for k, v in w.items() if isinstance(v, dict)), ("", {}))
            rows.append(
                [
                    kind,
                    body.get("totalBatches"),
                    fmt_state(body.get("state")),
                    fmt_time(body.get("endTime")),
                    _metrics(body) or body.get("uuid"),
                ]
            )
        print_table(["Workload", "Batches", "State", "Ended", "Metrics / checkpoint"], rows, title="Workloads")


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


def pick_checkpoint(client: Any, trial_id: int, latest: bool) -> dict[str, Any]:
    """The trial's newest kept checkpoint, or the one of its best searcher metric (the master's order
    for SORT_BY_SEARCHER_METRIC: best first, those without a validation last)."""
    query = (
        {"sortByAttr": "SORT_BY_BATCH_NUMBER", "orderBy": "ORDER_BY_DESC"}
        if latest
        else {"sortByAttr": "SORT_BY_SEARCHER_METRIC"}
    )
    found = (
        client.get(f"/api/v1/trials/{trial_id}/checkpoints", states="STATE_COMPLETED", limit=1, **query).get(
            "checkpoints"
        )
        or []
    )
    if not found:
        fail(f"trial {trial_id} has no checkpoint whose files are kept")
    if not latest and "searcherMetric" not in (found[0].get("training") or {}):
        fail(f"no kept checkpoint of trial {trial_id} has a validation of its searcher metric: use --latest")
    return found[0]


@app.command("download")
def download(
    ctx: typer.Context,
    trial_id: int,
    best: bool = typer.Option(False, "--best", help="the checkpoint of its best searcher metric"),
    latest: bool = typer.Option(False, "--latest", help="its newest checkpoint (most steps)"),
    output: Path | None = typer.Option(
        None, "--output", "-o", help="directory to create (default: ./checkpoints/UUID)"
    ),
    via_master: bool = typer.Option(
        False, "--via-master", help="stream through the master even if the files are visible here"
    ),
) -> None:
    """Download the trial's best or latest checkpoint into a new directory."""
    if best == latest:
        fail("give exactly one of --best and --latest")
    client = client_of(ctx)
    checkpoint = pick_checkpoint(client, trial_id, latest)
    uuid = checkpoint["uuid"]
    dest = output if output is not None else Path("checkpoints") / uuid
    how = download_checkpoint(client, checkpoint, dest, via_master=via_master)
    resources = checkpoint.get("resources") or {}
    steps = (checkpoint.get("metadata") or {}).get("steps_completed")
    say(
        f"Checkpoint {uuid} of trial {trial_id} at step {steps} ({fmt_bytes(file_bytes(resources))}) "
        f"is in {dest} ({how})"
    )


@app.command("export-metrics")
def export_metrics_command(
    ctx: typer.Context,
    trial_id: int,
    group: str | None = typer.Option(None, "--group", help="only this metric group (default: every group)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="file to write (default: stdout)"),
) -> None:
    """Export every metric report of a trial, unsampled, as CSV: a column per metric name."""
    written = export_metrics(client_of(ctx), trial_id, group=group, output=output)
    if output is not None and str(output) != "-":
        say(f"Wrote {fmt_bytes(written)} of trial {trial_id}'s metrics to {output}")
