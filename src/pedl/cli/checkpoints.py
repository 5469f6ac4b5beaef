"""`pedl checkpoint describe UUID`: one checkpoint (GET /api/v1/checkpoints/{uuid}).
Experiment-wide listings live in `pedl experiment list-checkpoints`."""

from __future__ import annotations

import typer

from pedl.cli.output import JsonFlag, fmt_bytes, fmt_state, fmt_time, print_fields, print_json
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="Inspect checkpoints.")


@app.command("describe")
def describe(ctx: typer.Context, uuid: str, as_json: JsonFlag = False) -> None:
    """Show a checkpoint: trial, state, metadata, files."""
    checkpoint = client_of(ctx).get(f"/api/v1/checkpoints/{uuid}").get("checkpoint") or {}
    if as_json:
        print_json(checkpoint)
        return
    training = checkpoint.get("training") or {}
    resources = checkpoint.get("resources") or {}
    size = sum(int(v) for v in resources.values() if str(v).isdigit())
    print_fields([
        ("UUID", checkpoint.get("uuid")), ("State", fmt_state(checkpoint.get("state"))),
        ("Trial", training.get("trialId")), ("Experiment", training.get("experimentId")),
        ("Reported", fmt_time(checkpoint.get("reportTime"))),
        ("Validation metrics", (training.get("validationMetrics") or {}).get("avgMetrics")),
        ("Metadata", checkpoint.get("metadata")),
        ("Files", f"{len(resources)} ({fmt_bytes(size)})"),
    ], title=f"Checkpoint {uuid}")
