"""`pedl experiment delete|continue` and `pedl experiment set max-slots|priority|weight`, over the
routes det uses: DELETE /api/v1/experiments/{id}, POST /api/v1/experiments/continue and PATCH
/api/v1/experiments/{id} with `resources`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pedl.cli.output import fail, say
from pedl.cli.state import client_of

set_app = typer.Typer(no_args_is_help=True, help="Change a live experiment's resources.")


def delete(
    ctx: typer.Context,
    experiment_id: int,
    yes: bool = typer.Option(False, "--yes", "-y", help="do not ask for confirmation"),
) -> None:
    """Delete an ended experiment: its checkpoints' files, metrics, logs and every record of it.
    The master answers at once and deletes in the background (the experiment shows DELETING)."""
    if not yes and not typer.confirm(
        f"Delete experiment {experiment_id} with its checkpoints, metrics and logs? This cannot be undone"
    ):
        say("Not deleted")
        raise typer.Exit(1)
    client_of(ctx).request("DELETE", f"/api/v1/experiments/{experiment_id}")
    say(f"Experiment {experiment_id} is being deleted")


def _set_path(data: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    for key in keys[:-1]:
        child = data.get(key)
        if not isinstance(child, dict):
            child = data[key] = {}
        data = child
    data[keys[-1]] = value


def overrides(config_file: Path | None, pairs: list[str]) -> dict[str, Any]:
    """The override config: the file's mapping, then each KEY=VALUE (a dotted key, a YAML value), as
    det's --config-file and --config."""
    import yaml

    data: dict[str, Any] = {}
    if config_file is not None:
        try:
            loaded = yaml.safe_load(config_file.read_text())
        except (OSError, yaml.YAMLError) as exc:
            fail(f"--config-file {config_file}: {exc}")
        if loaded is not None and not isinstance(loaded, dict):
            fail(f"--config-file {config_file}: must be a mapping of config keys")
        data = loaded or {}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--config {pair!r}: give KEY=VALUE, e.g. searcher.max_length.batches=2000")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            fail(f"--config {pair!r}: the value is not YAML: {exc}")
        _set_path(data, key.strip(), value)
    return data


def continue_(
    ctx: typer.Context,
    experiment_id: int,
    config: list[str] = typer.Option(
        [], "--config", help="KEY=VALUE to change, e.g. searcher.max_length.batches=2000; repeatable"
    ),
    config_file: Path | None = typer.Option(None, "--config-file", help="YAML of the keys to change"),
) -> None:
    """Continue an ended single-trial experiment: its trial trains on from its latest checkpoint,
    with the changes given (a longer searcher.max_length, a fixed hyperparameter...)."""
    import yaml

    text = yaml.safe_dump(overrides(config_file, config))
    got = client_of(ctx).post("/api/v1/experiments/continue", {"id": experiment_id, "overrideConfig": text})
    state = (got.get("experiment") or {}).get("state", "")
    say(f"Continued experiment {experiment_id} ({state.removeprefix('STATE_')})")


def _patch_resources(ctx: typer.Context, experiment_id: int, key: str, value: Any, shown: str) -> None:
    client_of(ctx).request(
        "PATCH", f"/api/v1/experiments/{experiment_id}", json={"id": experiment_id, "resources": {key: value}}
    )
    say(f"Set {shown} of experiment {experiment_id} to {'none' if value is None else value}")


@set_app.command("max-slots")
def set_max_slots(
    ctx: typer.Context,
    experiment_id: int,
    slots: str = typer.Argument(..., metavar="N|none", help="the most slots its trials hold at once; none: no cap"),
) -> None:
    """Cap the slots the experiment's trials hold together; running trials keep theirs, new ones wait."""
    if slots.lower() in ("none", "null"):
        value = None
    elif slots.isdigit():
        value = int(slots)
    else:
        fail(f"max-slots {slots!r}: give a number of slots or 'none'")
    _patch_resources(ctx, experiment_id, "maxSlots", value, "max_slots")


@set_app.command("priority")
def set_priority(
    ctx: typer.Context, experiment_id: int, priority: int = typer.Argument(..., help="1 (most urgent) to 99")
) -> None:
    """Change the priority of the experiment's trials, waiting and running."""
    _patch_resources(ctx, experiment_id, "priority", priority, "priority")


@set_app.command("weight")
def set_weight(
    ctx: typer.Context, experiment_id: int, weight: float = typer.Argument(..., help="its fair-share weight")
) -> None:
    """Change the experiment's fair-share weight."""
    _patch_resources(ctx, experiment_id, "weight", weight, "weight")
