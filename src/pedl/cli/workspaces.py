"""`pedl workspace list|create|describe`: Determined's workspaces, each a set of projects
(/api/v1/workspaces)."""

from __future__ import annotations

from typing import Any

import typer

from pedl.cli.client import MasterClient
from pedl.cli.output import JsonFlag, print_fields, print_json, print_table, say
from pedl.cli.state import client_of
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Workspaces: sets of projects.")


def workspace_by_name(client: MasterClient, name: str) -> dict[str, Any]:
    """The workspace named `name` (in any case, as det's SDK looks them up)."""
    found = client.get("/api/v1/workspaces", name=name).get("workspaces") or []
    if not found:
        raise NotFound(f"no workspace named {name!r} (pedl workspace list shows them)")
    return found[0]


def project_rows(projects: list[dict[str, Any]]) -> list[list[Any]]:
    return [
        [
            p.get("id"),
            p.get("key"),
            p.get("name"),
            p.get("description"),
            p.get("numExperiments"),
            p.get("numActiveExperiments"),
            p.get("username"),
        ]
        for p in projects
    ]


PROJECT_COLUMNS = ["ID", "Key", "Name", "Description", "Experiments", "Active", "Owner"]


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List every workspace."""
    workspaces = client_of(ctx).paginate("/api/v1/workspaces", "workspaces")
    if as_json:
        print_json(workspaces)
        return
    print_table(
        ["ID", "Name", "Projects", "Experiments", "Owner"],
        [
            [w.get("id"), w.get("name"), w.get("numProjects"), w.get("numExperiments"), w.get("username")]
            for w in workspaces
        ],
    )


@app.command("create")
def create(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="a name no other workspace has, in any case"),
    as_json: JsonFlag = False,
) -> None:
    """Create a workspace of your own."""
    ws = client_of(ctx).post("/api/v1/workspaces", {"name": name})["workspace"]
    if as_json:
        print_json(ws)
        return
    say(f"Created workspace {ws['name']} (id {ws['id']})")


@app.command("describe")
def describe(
    ctx: typer.Context, name: str = typer.Argument(..., help="workspace name"), as_json: JsonFlag = False
) -> None:
    """A workspace and its projects."""
    client = client_of(ctx)
    ws = workspace_by_name(client, name)
    projects = client.paginate(f"/api/v1/workspaces/{ws['id']}/projects", "projects")
    if as_json:
        print_json({"workspace": ws, "projects": projects})
        return
    print_fields(
        [
            ("ID", ws.get("id")),
            ("Name", ws.get("name")),
            ("Owner", ws.get("username")),
            ("Projects", ws.get("numProjects")),
            ("Experiments", ws.get("numExperiments")),
            ("Immutable", ws.get("immutable")),
        ],
        title=f"Workspace {ws.get('name')}",
    )
    print_table(PROJECT_COLUMNS, project_rows(projects), title="Projects")
