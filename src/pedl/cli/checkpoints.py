"""`pedl checkpoint list|describe|download|delete|rm` over /api/v1/checkpoints. Experiment-wide listings
in det's shape are also in `pedl experiment list-checkpoints`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pedl.cli.checkpoint_download import download_checkpoint, file_bytes
from pedl.cli.output import (
    JsonFlag,
    fmt_bytes,
    fmt_state,
    fmt_time,
    print_fields,
    print_json,
    print_table,
    say,
)
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="List, inspect, download and delete checkpoints.")
DELETED = "STATE_DELETED"  # garbage collection (or a user) removed its files; only the record is left


def _state_param(value: str) -> str:
    value = value.upper()
    return value if value.startswith("STATE_") else f"STATE_{value}"


def where(checkpoint: dict[str, Any]) -> str | None:
    """Where the files live, as a path or URL."""
    storage = checkpoint.get("storage") or {}
    uuid = checkpoint.get("uuid")
    if storage.get("type") == "s3":
        prefix = "/".join(p for p in (storage.get("prefix") or "").split("/") if p)
        return f"s3://{storage.get('bucket')}/{prefix + '/' if prefix else ''}{uuid}/"
    if storage.get("host_path"):
        base = Path(storage["host_path"])
        if storage.get("storage_path"):
            base = base / storage["storage_path"]
        return str(base / str(uuid))
    return None


@app.command("list")
def list_(
    ctx: typer.Context,
    experiment: int | None = typer.Option(None, "--experiment", "-e", help="only this experiment's"),
    trial: int | None = typer.Option(None, "--trial", "-t", help="only this trial's"),
    state: list[str] = typer.Option(
        [], "--state", "-s", help="only in this state (COMPLETED, DELETED, ...); repeatable"
    ),
    as_json: JsonFlag = False,
) -> None:
    """List checkpoints, oldest first (GET /api/v1/checkpoints)."""
    params = {"experimentId": experiment, "trialId": trial, "states": [_state_param(s) for s in state] or None}
    checkpoints = client_of(ctx).paginate("/api/v1/checkpoints", "checkpoints", params)
    if as_json:
        print_json(checkpoints)
        return
    rows = []
    for c in checkpoints:
        training = c.get("training") or {}
        size = "" if c.get("state") == DELETED else fmt_bytes(file_bytes(c.get("resources") or {}))
        rows.append(
            [
                c.get("uuid"),
                training.get("experimentId"),
                training.get("trialId"),
                (c.get("metadata") or {}).get("steps_completed"),
                fmt_state(c.get("state")),
                training.get("searcherMetric"),
                size,
                fmt_time(c.get("reportTime")),
            ]
        )
    print_table(["UUID", "Experiment", "Trial", "Steps", "State", "Searcher metric", "Size", "Reported"], rows)


@app.command("describe")
def describe(ctx: typer.Context, uuid: str, as_json: JsonFlag = False) -> None:
    """Show a checkpoint: trial, state, metadata, files, where they live."""
    checkpoint = client_of(ctx).get(f"/api/v1/checkpoints/{uuid}").get("checkpoint") or {}
    if as_json:
        print_json(checkpoint)
        return
    training = checkpoint.get("training") or {}
    resources = checkpoint.get("resources") or {}
    size = sum(int(v) for v in resources.values() if str(v).isdigit())
    deleted = checkpoint.get("state") == DELETED
    print_fields(
        [
            ("UUID", checkpoint.get("uuid")),
            ("State", fmt_state(checkpoint.get("state"))),
            ("Trial", training.get("trialId")),
            ("Experiment", training.get("experimentId")),
            ("Reported", fmt_time(checkpoint.get("reportTime"))),
            ("Validation metrics", (training.get("validationMetrics") or {}).get("avgMetrics")),
            ("Metadata", checkpoint.get("metadata")),
            ("Files", "none: deleted" if deleted else f"{len(resources)} ({fmt_bytes(size)})"),
            ("Location", "its files were deleted" if deleted else where(checkpoint)),
        ],
        title=f"Checkpoint {uuid}",
    )


@app.command("download")
def download(
    ctx: typer.Context,
    uuid: str,
    output: Path | None = typer.Option(
        None, "--output", "-o", help="directory to create (default: ./checkpoints/UUID)"
    ),
    via_master: bool = typer.Option(
        False, "--via-master", help="stream through the master even if the files are visible here"
    ),
) -> None:
    """Download a checkpoint's files into a new directory, showing progress."""
    client = client_of(ctx)
    checkpoint = client.get(f"/api/v1/checkpoints/{uuid}").get("checkpoint") or {}
    dest = output if output is not None else Path("checkpoints") / uuid
    how = download_checkpoint(
        client, {**checkpoint, "uuid": checkpoint.get("uuid") or uuid}, dest, via_master=via_master
    )
    resources = checkpoint.get("resources") or {}
    files = sum(1 for name in resources if not name.endswith("/"))
    say(f"Checkpoint {uuid} ({files} files, {fmt_bytes(file_bytes(resources))}) is in {dest} ({how})")


def _confirm(question: str, yes: bool) -> None:
    if not yes and not typer.confirm(question):
        say("Nothing deleted")
        raise typer.Exit(1)


def _show_outcome(ctx: typer.Context, uuids: list[str]) -> None:
    client = client_of(ctx)
    for uuid in uuids:
        checkpoint = client.get(f"/api/v1/checkpoints/{uuid}").get("checkpoint") or {}
        resources = checkpoint.get("resources") or {}
        files = sum(1 for name in resources if not name.endswith("/"))
        left = (
            "no files left"
            if checkpoint.get("state") == DELETED
            else f"{files} files left ({fmt_bytes(file_bytes(resources))})"
        )
        say(f"Checkpoint {uuid}: {fmt_state(checkpoint.get('state'))}, {left}")


@app.command("delete")
def delete(
    ctx: typer.Context,
    uuids: list[str] = typer.Argument(..., help="the checkpoints (at most 100)"),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete checkpoints' files from storage; they stay listed as DELETED. A checkpoint registered as a
    model version is refused (delete the version first)."""
    _confirm(f"Delete the files of {len(uuids)} checkpoint(s) from storage? This cannot be undone", yes)
    client_of(ctx).request("DELETE", "/api/v1/checkpoints", json={"checkpointUuids": uuids})
    _show_outcome(ctx, uuids)


@app.command("rm")
def remove_files(
    ctx: typer.Context,
    uuids: list[str] = typer.Argument(..., help="the checkpoints (at most 100)"),
    globs: list[str] = typer.Option(
        [],
        "--glob",
        "-g",
        help="files to delete, relative to the checkpoint (`*.pt`, "
        "`logs`, `**/*.tmp`); repeatable. None: only read again "
        "what storage holds",
    ),
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete the files of checkpoints that globs name. A checkpoint with files left is PARTIALLY_DELETED,
    one with none DELETED."""
    if globs:
        _confirm(
            f"Delete the files matching {', '.join(globs)} from {len(uuids)} checkpoint(s)? This cannot be undone", yes
        )
    client_of(ctx).post("/api/v1/checkpoints/rm", {"checkpointUuids": uuids, "checkpointGlobs": globs})
    _show_outcome(ctx, uuids)
