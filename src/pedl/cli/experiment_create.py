"""`pedl experiment create CONFIG MODEL_DIR`: validate the config locally, pack the model directory,
upload both (POST /api/v1/experiments) with progress bars, and optionally follow the experiment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pedl.cli.client import MasterClient
from pedl.cli.experiment_watch import COMPLETED, follow_experiment
from pedl.cli.model_upload import check_size, scan_model_dir, v1_file
from pedl.cli.output import err, error_line, fail, fmt_bytes, info, say, warn
from pedl.cli.state import client_of
from pedl.errors import InvalidArgument

if TYPE_CHECKING:
    from rich.progress import Progress

    from pedl.config.loading import ConfigError


def _progress() -> Progress:
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    console = err()
    return Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def config_problems(exc: InvalidArgument | ConfigError) -> list[str]:
    """One line per problem, each starting with its field path; pydantic's `Value error, a; b`
    messages (several problems found by one validator) are split apart."""
    lines = []
    for problem in exc.fields:
        field, message = str(problem.get("field", "<root>")), str(problem.get("message", ""))
        if "Value error, " not in message:
            lines.append(f"{field}: {message}")
            continue
        for part in message.replace("Value error, ", "").split("; "):
            head = part.split(": ", 1)[0]
            if field == "<root>":
                lines.append(part)
            elif ": " in part and " " not in head:
                lines.append(f"{field}.{part}")  # already names a sub-path, e.g. `lr: ...`
            else:
                lines.append(f"{field}: {part}")
    return lines


def validate_config(path: Path) -> str:
    """The config's text, after checking it the way the master will; exits 1 listing problems."""
    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read the experiment config {path}: {exc.strerror}")
    from pedl.config.experiment_config import parse_experiment_config  # pydantic: load on use

    try:
        parse_experiment_config(text, source=str(path))
    except InvalidArgument as exc:  # ConfigError, with one entry in `fields` per problem
        problems = config_problems(exc)
        if not problems or exc.message.startswith("malformed YAML"):
            fail(exc.message)
        error_line(f"invalid experiment config {path} ({len(problems)} problem{'s' if len(problems) > 1 else ''}):")
        for line in problems:
            err().print(f"  - {line}", style="red", markup=False, highlight=False)
        raise typer.Exit(1) from None
    return text


def read_partial_config(path: Path) -> str:
    """The config's text when a template completes it: only its YAML is checked here, the master
    validates it once the template is merged under it."""
    from pedl.config.loading import parse_yaml_text  # pydantic: load on use

    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read the experiment config {path}: {exc.strerror}")
    if not isinstance(parse_yaml_text(text, str(path)), dict):
        fail(f"the experiment config {path} must be a mapping of config keys")
    return text


def pack(model_dir: Path) -> list[dict[str, Any]]:
    entries = scan_model_dir(model_dir)
    total = check_size(entries, model_dir)
    with _progress() as progress:
        task = progress.add_task(f"Packing {model_dir}", total=total)
        files = []
        for entry in entries:
            files.append(v1_file(entry))
            progress.advance(task, entry.size)
    info(f"Packed {len(files)} entries ({fmt_bytes(total)}) from {model_dir}")
    return files


def upload(client: MasterClient, body: dict[str, Any]) -> dict[str, Any]:
    raw = json.dumps(body).encode()
    with _progress() as progress:
        task = progress.add_task("Uploading to the master", total=len(raw))

        def sent(n: int) -> None:
            progress.advance(task, n)
            if progress.tasks[0].completed >= len(raw):
                progress.update(task, description="Waiting for the master")

        return client.upload("/api/v1/experiments", raw, sent)


def create(
    ctx: typer.Context,
    config: Path = typer.Argument(..., help="experiment config (YAML)"),
    model_dir: Path = typer.Argument(..., help="directory with the training code"),
    follow: bool = typer.Option(False, "--follow", "-f", help="stream every trial's logs until the experiment ends"),
    paused: bool = typer.Option(False, "--paused", help="create the experiment without starting it"),
    project: int | None = typer.Option(
        None,
        "--project",
        "--project-id",
        min=1,
        help="the id of the project it goes into (pedl project list shows them)",
    ),
    template: str | None = typer.Option(
        None, "--template", "-t", help="a template (pedl template list) to merge under CONFIG"
    ),
) -> None:
    """Create an experiment from CONFIG and the code in MODEL_DIR."""
    text = read_partial_config(config) if template else validate_config(config)
    files = pack(model_dir)
    client = client_of(ctx)
    # The same fields Determined's `det experiment create` sends.
    body = {
        "activate": not paused,
        "config": text,
        "modelDefinition": files,
        "parentId": None,
        "projectId": project,
        "template": template,
        "validateOnly": False,
    }
    answer = upload(client, body)
    experiment_id = (answer.get("experiment") or {}).get("id")
    say(f"Created experiment {experiment_id}")
    for warning in answer.get("warningMessages") or answer.get("warnings") or []:
        warn(str(warning))
    if follow and experiment_id is not None:
        final = follow_experiment(client, int(experiment_id))
        raise typer.Exit(0 if final == COMPLETED else 1)
