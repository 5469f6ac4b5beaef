"""`pedl tensorboard start EXP_ID...|open|list|logs|kill`: TensorBoard over experiments' (or trials')
TensorBoard files, reached through the master's proxy (POST /api/v1/tensorboards)."""

from __future__ import annotations

from pathlib import Path

import typer

from pedl.cli import ntsc, proxied
from pedl.cli.output import fail
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="TensorBoards of experiments and trials.")
ntsc.add_common_verbs(app, ntsc.TENSORBOARD)
proxied.add_open(app, ntsc.TENSORBOARD)


@app.command("start")
def start(
    ctx: typer.Context,
    experiment_ids: list[int] | None = typer.Argument(
        None, metavar="[EXP_ID...]", min=1, help="the experiments whose trials it shows"
    ),
    trial_ids: list[int] = typer.Option(
        [], "--trial", "-t", metavar="TRIAL_ID", min=1, help="a trial it shows; repeatable"
    ),
    config: list[str] = ntsc.ConfigOption,
    config_file: Path | None = ntsc.ConfigFileOption,
    context: Path | None = ntsc.ContextOption,
    detach: bool = ntsc.DetachOption,
    workspace: str | None = ntsc.WorkspaceOption,
    template: str | None = ntsc.TemplateOption,
) -> None:
    """Start a TensorBoard of experiments (or trials), wait until it is ready and print its URL."""
    if not experiment_ids and not trial_ids:
        fail("EXP_ID: give at least one experiment id (or --trial TRIAL_ID)")
    client = client_of(ctx)
    body = ntsc.launch_body(
        client, config_file=config_file, config=config, context=context, workspace=workspace, template=template
    )
    body.update(experimentIds=list(experiment_ids or []), trialIds=list(trial_ids))
    proxied.started(client, ntsc.TENSORBOARD, ntsc.launch(client, ntsc.TENSORBOARD, body), detach=detach)
