"""`pedl cmd run|list|logs|kill`: commands, run on an agent as tasks of their own (POST /api/v1/commands).
`run` prints the command's output as it comes (its task's logs, followed) and exits with its code."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer

from pedl.cli import ntsc
from pedl.cli.client import MasterClient
from pedl.cli.log_stream import LinePrinter, log_text, stream_logs, task_logs_path
from pedl.cli.output import error_line, fail, info, say
from pedl.cli.state import client_of
from pedl.errors import PedlError

app = typer.Typer(no_args_is_help=True, help="Run commands on the cluster.")
ntsc.add_common_verbs(app, ntsc.COMMAND)


def final_allocation(client: MasterClient, task_id: str) -> dict[str, Any]:
    """The task's last allocation (GET /api/v1/tasks/{id}): its state, statusCode and exitReason."""
    allocations = client.get(f"/api/v1/tasks/{quote(task_id, safe='')}").get("task", {}).get("allocations") or []
    return allocations[-1] if allocations else {}


def exit_code_of(alloc: dict[str, Any]) -> int:
    """The CLI's exit status for how the command ended: its own code where it has one in 0..255, else 1."""
    code = alloc.get("statusCode")
    if isinstance(code, int) and 0 <= code <= 255:
        return code
    return 1


def _output_printer() -> Any:
    """The command's own output on stdout, as it printed it; what the master and the agent say about
    the command (it ended, it could not start) on stderr."""
    printer = LinePrinter()

    def show(record: dict[str, Any]) -> None:
        if record.get("source") in ("master", "agent") or record.get("stdtype") in ("master", "agent"):
            text = log_text(record).rstrip("\n")
            if text:
                info(text)
        else:
            printer.log(record)

    return show


# `pedl cmd run sh -c "echo hi"`: everything from the first argument on is the command's own
@app.command("run", context_settings={"allow_interspersed_args": False})
def run(
    ctx: typer.Context,
    entrypoint: list[str] | None = typer.Argument(
        None, metavar="CMD [ARG...]", help="the command and its arguments (else config's entrypoint)"
    ),
    config: list[str] = ntsc.ConfigOption,
    config_file: Path | None = ntsc.ConfigFileOption,
    context: Path | None = ntsc.ContextOption,
    detach: bool = ntsc.DetachOption,
    workspace: str | None = ntsc.WorkspaceOption,
    template: str | None = ntsc.TemplateOption,
) -> None:
    """Run a command on an agent and print its output until it ends (-d: print its id and return)."""
    client = client_of(ctx)
    body = ntsc.launch_body(
        client, config_file=config_file, config=config, context=context, workspace=workspace, template=template
    )
    if entrypoint and not body["config"].get("entrypoint"):
        body["config"]["entrypoint"] = list(entrypoint)
    if not body["config"].get("entrypoint") and template is None:
        fail("CMD: give the command to run (pedl cmd run CMD [ARG...]), or `entrypoint` in --config-file")
    cmd = ntsc.launch(client, ntsc.COMMAND, body)
    task_id = str(cmd.get("id"))
    if detach:
        say(task_id)
        return
    info(f"Launched command {task_id} ({cmd.get('description', '')})")
    try:
        ntsc.wait_for(client, ntsc.COMMAND, task_id, lambda i: i.get("state") != ntsc.QUEUED)
        stream_logs(client, task_logs_path(task_id), _output_printer(), follow=True)
        alloc = final_allocation(client, task_id)
    except KeyboardInterrupt:
        info(
            f"Command {task_id} goes on: `pedl cmd logs -f {task_id}` follows it again, "
            f"`pedl cmd kill {task_id}` stops it"
        )
        raise typer.Exit(130) from None
    except PedlError as exc:
        error_line(f"{exc.message} (the command goes on: `pedl cmd logs -f {task_id}` follows it again)")
        raise typer.Exit(1) from None
    code = exit_code_of(alloc)
    if code != 0:
        error_line(f"command {task_id} {alloc.get('exitReason') or 'ended'}")
    raise typer.Exit(code)
