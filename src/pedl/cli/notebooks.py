"""`pedl notebook start|open|list|logs|kill`: JupyterLab on an agent, reached through the master's
proxy (POST /api/v1/notebooks)."""

from __future__ import annotations

from pathlib import Path

import typer

from pedl.cli import ntsc, proxied
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="JupyterLab notebooks on the cluster.")
ntsc.add_common_verbs(app, ntsc.NOTEBOOK)
proxied.add_open(app, ntsc.NOTEBOOK)


@app.command("start")
def start(
    ctx: typer.Context,
    config: list[str] = ntsc.ConfigOption,
    config_file: Path | None = ntsc.ConfigFileOption,
    context: Path | None = ntsc.ContextOption,
    detach: bool = ntsc.DetachOption,
    workspace: str | None = ntsc.WorkspaceOption,
    template: str | None = ntsc.TemplateOption,
) -> None:
    """Start a notebook, wait until it is ready and print its URL (-d: print its id and return)."""
    client = client_of(ctx)
    body = ntsc.launch_body(
        client, config_file=config_file, config=config, context=context, workspace=workspace, template=template
    )
    proxied.started(client, ntsc.NOTEBOOK, ntsc.launch(client, ntsc.NOTEBOOK, body), detach=detach)
