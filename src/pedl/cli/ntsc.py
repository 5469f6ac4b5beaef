"""What `pedl cmd|notebook|shell|tensorboard` share, over the master's /api/v1/{kinds} routes: the
launch body (config from --config-file and --config KEY=VALUE, the context directory, the workspace),
the list, kill and logs verbs, and waiting for a task with its progress shown on stderr."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer

from pedl.cli.client import MasterClient
from pedl.cli.experiment_lifecycle import overrides
from pedl.cli.log_stream import log_text, task_logs_path
from pedl.cli.model_upload import pack_model_dir
from pedl.cli.output import (
    JsonFlag,
    err,
    error_line,
    fail,
    fmt_state,
    fmt_time,
    info,
    print_json,
    print_table,
    say,
)
from pedl.cli.state import client_of
from pedl.cli.workspaces import workspace_by_name
from pedl.errors import InvalidArgument, NotFound, PedlError

POLL_INTERVAL = 1.0  # seconds between reads of a task while waiting for it
QUEUED = "STATE_QUEUED"
ENDED = frozenset({"STATE_TERMINATED"})
FAILED_TAIL = 20  # log lines shown when a task ends before it is ready
TASK_ID = re.compile(r"^(?:[0-9]+\.)?[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.I)


@dataclass(frozen=True)
class Kind:
    """One of the four kinds as the API names it (`command`, `commands`) and the CLI shows it."""

    name: str
    plural: str
    label: str  # "Command", "Notebook"...
    verb: str  # the CLI's group: `cmd`, `notebook`, ...

    def path(self, task_id: str | None = None) -> str:
        base = f"/api/v1/{self.plural}"
        return base if task_id is None else f"{base}/{quote(task_id, safe='')}"


COMMAND = Kind("command", "commands", "Command", "cmd")
NOTEBOOK = Kind("notebook", "notebooks", "Notebook", "notebook")
SHELL = Kind("shell", "shells", "Shell", "shell")
TENSORBOARD = Kind("tensorboard", "tensorboards", "TensorBoard", "tensorboard")

# -- options every `start` takes -----------------------------------------------------------------

ConfigOption = typer.Option(
    [],
    "--config",
    metavar="KEY=VALUE",
    help="a config key to set (dotted, a YAML value), e.g. resources.slots=0; repeatable",
)
ConfigFileOption = typer.Option(None, "--config-file", metavar="FILE", help="the task's config (YAML)")
ContextOption = typer.Option(
    None,
    "--context",
    "-c",
    metavar="DIR",
    help="a directory whose files the task gets in its working directory (.pedlignore and .detignore honoured)",
)
DetachOption = typer.Option(False, "--detach", "-d", help="start it in the background and print its id")
WorkspaceOption = typer.Option(
    None, "--workspace", "-w", metavar="NAME|ID", help="the workspace it is started in (default: Uncategorized)"
)
TemplateOption = typer.Option(
    None, "--template", metavar="NAME", help="a template (pedl template list) merged under the config"
)


def launch_body(
    client: MasterClient,
    *,
    config_file: Path | None,
    config: list[str],
    context: Path | None,
    workspace: str | None,
    template: str | None,
) -> dict[str, Any]:
    """POST /api/v1/{kinds}'s body, Determined's fields; a bad argument exits 1 naming it."""
    if config_file is not None and not config_file.is_file():
        fail(f"--config-file {config_file}: no such file")
    if context is not None and not context.is_dir():
        fail(f"--context {context}: not a directory")
    body: dict[str, Any] = {"config": overrides(config_file, config)}
    if context is not None:
        try:
            body["files"] = pack_model_dir(context)
        except InvalidArgument as exc:  # too large, unreadable: say which argument
            fail(f"--context {context}: {exc.message.replace('model directory', 'the directory')}")
    if workspace is not None:
        body["workspaceId"] = workspace_id(client, workspace)
    if template is not None:
        body["templateName"] = template
    return body


def workspace_id(client: MasterClient, text: str) -> int:
    """--workspace as an id (digits) or a name."""
    text = text.strip()
    if not text:
        fail("--workspace: give a workspace name or id")
    if text.isdigit():
        return int(text)
    try:
        return int(workspace_by_name(client, text)["id"])
    except NotFound as exc:
        fail(f"--workspace: {exc.message}")


def launch(client: MasterClient, kind: Kind, body: dict[str, Any]) -> dict[str, Any]:
    """Start it; a config the master refuses is listed one problem per line, each naming its field."""
    try:
        answer = client.post(kind.path(), body)
    except InvalidArgument as exc:
        problems = [f"{f.get('field')}: {f.get('message')}" for f in exc.fields or []]
        if len(problems) <= 1:
            raise
        error_line(f"the master refused the {kind.name}'s config ({len(problems)} problems):")
        for line in problems:
            err().print(f"  - {line}", style="red", markup=False, highlight=False)
        raise typer.Exit(1) from None
    return answer.get(kind.name) or {}


def expand_ids(client: MasterClient, kind: Kind, given: list[str]) -> list[str]:
    """Full ids as given; a shorter one is the prefix of exactly one live task of the kind (as det's)."""
    if all(TASK_ID.match(i) for i in given):
        return list(given)
    live = [str(t.get("id")) for t in client.get(kind.path()).get(kind.plural) or []]
    out = []
    for prefix in given:
        if TASK_ID.match(prefix):
            out.append(prefix)
            continue
        found = [i for i in live if i.startswith(prefix)] if prefix else []
        if len(found) != 1:
            why = "matches no live" if not found else f"matches {len(found)} live"
            fail(f"{kind.name} id {prefix!r} {why} {kind.plural} (pedl {kind.verb} list -a shows them)")
        out.append(found[0])
    return out


def describe(client: MasterClient, kind: Kind, task_id: str) -> dict[str, Any]:
    return client.get(kind.path(task_id)).get(kind.name) or {}


def service_url(client: MasterClient, item: dict[str, Any]) -> str:
    """Where a notebook's or TensorBoard's service is reached: the master's proxy."""
    address = item.get("serviceAddress") or f"/proxy/{item.get('id')}/"
    return client.url + (address if address.startswith("/") else "/" + address)


# -- waiting -------------------------------------------------------------------------------------


def wait_reason(client: MasterClient, task_id: str) -> str:
    """Why the task's allocation waits, as the scheduler says (GET /api/v1/tasks), or ""."""
    try:
        summaries = client.get("/api/v1/tasks").get("allocationIdToSummary") or {}
    except PedlError:
        return ""
    return next((str(s.get("waitReason") or "") for s in summaries.values() if s.get("taskId") == task_id), "")


class StatusLine:
    """A spinner on a terminal's stderr, or one line per change where stderr is not a terminal."""

    def __init__(self) -> None:
        self.console = err()
        self._status: Any = None
        self._last = ""

    def __enter__(self) -> StatusLine:
        if self.console.is_terminal:
            self._status = self.console.status("", spinner="dots")
            self._status.__enter__()
        return self

    def show(self, text: str) -> None:
        if text == self._last:
            return
        self._last = text
        if self._status is not None:
            self._status.update(text)
        else:
            info(text)

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(*exc)


def pause(seconds: float) -> None:
    """Between two reads of a waited-for task (tests replace it to act in between)."""
    time.sleep(seconds)


def wait_for(client: MasterClient, kind: Kind, task_id: str, until: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """Poll the task until `until(item)` or it has ended, showing its state (and why it waits while
    queued); returns the last item read."""
    with StatusLine() as progress:
        while True:
            item = describe(client, kind, task_id)
            state = str(item.get("state") or "")
            if until(item) or state in ENDED:
                return item
            text = f"{kind.label} {task_id} is {fmt_state(state) or 'starting'}"
            if state == QUEUED:
                reason = wait_reason(client, task_id)
                text += f": {reason}" if reason else ", waiting for resources"
            progress.show(text)
            pause(POLL_INTERVAL)


def wait_ready(client: MasterClient, kind: Kind, task_id: str) -> dict[str, Any]:
    """Wait until the task is ready; one that ended first exits 1, with its last log lines."""
    item = wait_for(client, kind, task_id, lambda i: bool(i.get("isReady")))
    if item.get("isReady"):
        return item
    error_line(
        f"{kind.name} {task_id} ended before it was ready"
        + (f" ({item['exitStatus']})" if item.get("exitStatus") else "")
    )
    tail = last_log_lines(client, task_id, FAILED_TAIL)
    if tail:
        err().print(f"its last log lines (pedl {kind.verb} logs {task_id} shows them all):", style="dim")
        for line in tail:
            err().print(line, markup=False, highlight=False)
    raise typer.Exit(1)


def last_log_lines(client: MasterClient, task_id: str, count: int) -> list[str]:
    try:
        records = list(
            client.stream_ndjson(task_logs_path(task_id), {"follow": False, "limit": count, "orderBy": "ORDER_BY_DESC"})
        )
    except PedlError:
        return []
    return [log_text(r).rstrip("\n") for r in reversed(records) if log_text(r)]


# -- the verbs every kind has -----------------------------------------------------------------------


def columns(kind: Kind) -> list[str]:
    extra = ["Experiments", "Trials"] if kind is TENSORBOARD else []
    return ["ID", "Owner", "Description", "State", "Ready", *extra, "Resource pool", "Started"]


def row(kind: Kind, item: dict[str, Any]) -> list[Any]:
    extra = [", ".join(map(str, item.get("experimentIds") or [])), ", ".join(map(str, item.get("trialIds") or []))]
    return [
        item.get("id"),
        item.get("username"),
        item.get("description"),
        fmt_state(item.get("state")),
        bool(item.get("isReady")),
        *(extra if kind is TENSORBOARD else []),
        item.get("resourcePool"),
        fmt_time(item.get("startTime")),
    ]


def add_common_verbs(app: typer.Typer, kind: Kind) -> None:
    """`list`, `logs` and `kill` of a kind."""

    @app.command("list")
    def list_(
        ctx: typer.Context,
        all_: bool = typer.Option(False, "--all", "-a", help="every user's, not only yours"),
        as_json: JsonFlag = False,
    ) -> None:
        client = client_of(ctx)
        params = {} if all_ else {"users": [client.username]}
        items = client.get(kind.path(), **params).get(kind.plural) or []
        if as_json:
            print_json(items)
            return
        print_table(columns(kind), [row(kind, i) for i in items])

    list_.__doc__ = f"List your {kind.plural} (-a: everyone's): the live ones, and those that ended in the last day."

    @app.command("logs")
    def logs(
        ctx: typer.Context,
        task_id: str = typer.Argument(..., metavar="ID", help=f"the {kind.name}'s id"),
        follow: bool = typer.Option(False, "--follow", "-f", help=f"keep printing until the {kind.name} ends"),
        tail: int | None = typer.Option(None, "--tail", min=0, help="only the last N lines"),
    ) -> None:
        from pedl.cli import tasks

        client = client_of(ctx)
        [full] = expand_ids(client, kind, [task_id])
        tasks.logs(ctx, full, follow=follow, tail=tail)

    logs.__doc__ = f"Print a {kind.name}'s logs."

    @app.command("kill")
    def kill(
        ctx: typer.Context,
        task_ids: list[str] = typer.Argument(..., metavar="ID...", help=f"the {kind.plural} to kill"),
    ) -> None:
        client = client_of(ctx)
        failed = 0
        for task_id in expand_ids(client, kind, task_ids):
            try:
                client.post(f"{kind.path(task_id)}/kill")
            except PedlError as exc:
                error_line(f"{kind.name} {task_id}: {exc.message}")
                failed += 1
                continue
            say(f"Killed {kind.name} {task_id}")
        if failed:
            raise typer.Exit(1)

    kill.__doc__ = f"Kill {kind.plural} (yours, or anyone's as an admin); killing an ended one changes nothing."
