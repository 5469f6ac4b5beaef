"""What notebooks and TensorBoards share: each is a web service reached through the master's proxy at
<master>/proxy/<id>/, so `start` waits until it is ready and prints that URL, and `open` prints it and
opens it in a browser (logged in to the WebUI: the proxy takes its session)."""

from __future__ import annotations

import webbrowser
from typing import Any

import typer

from pedl.cli import ntsc
from pedl.cli.client import MasterClient
from pedl.cli.output import fail, info, say
from pedl.cli.state import client_of


def started(client: MasterClient, kind: ntsc.Kind, item: dict[str, Any], *, detach: bool) -> None:
    """After the launch: print the id (-d), or wait until it is ready and print its URL."""
    task_id = str(item.get("id"))
    if detach:
        say(task_id)
        return
    info(f"Launched {kind.name} {task_id} ({item.get('description', '')})")
    ready = ntsc.wait_ready(client, kind, task_id)
    info(f"{kind.label} {task_id} is ready; `pedl {kind.verb} open {task_id}` opens it in your browser")
    say(ntsc.service_url(client, ready))


def add_open(app: typer.Typer, kind: ntsc.Kind) -> None:
    @app.command("open")
    def open_(
        ctx: typer.Context,
        task_id: str = typer.Argument(..., metavar="ID", help=f"the {kind.name}'s id"),
        browser: bool = typer.Option(
            True, "--browser/--no-browser", help="open the URL in a browser (else only print it)"
        ),
    ) -> None:
        client = client_of(ctx)
        [full] = ntsc.expand_ids(client, kind, [task_id])
        item = ntsc.describe(client, kind, full)
        if item.get("state") in ntsc.ENDED:
            fail(f"{kind.name} {full} has ended" + (f" ({item['exitStatus']})" if item.get("exitStatus") else ""))
        if not item.get("isReady"):
            item = ntsc.wait_ready(client, kind, full)
        url = ntsc.service_url(client, item)
        say(url)
        if browser and not webbrowser.open(url):
            info("no browser could be started here: open the URL above in yours (logged in to the WebUI)")

    open_.__doc__ = f"Print a {kind.name}'s URL and open it in a browser (it waits until it is ready)."
