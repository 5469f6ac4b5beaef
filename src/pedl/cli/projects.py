"""`pedl project list|create|describe`: Determined's projects, each in a workspace; experiments
belong to one (`pedl experiment create --project ID`)."""

from __future__ import annotations

from typing import Any

import typer

from pedl.cli.client import MasterClient
from pedl.cli.output import JsonFlag, fmt_percent, fmt_state, fmt_time, print_fields, print_json, print_table, say
from pedl.cli.state import client_of
from pedl.cli.workspaces import PROJECT_COLUMNS, project_rows, workspace_by_name
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Projects: where experiments belong.")


def project_by_name(client: MasterClient, workspace: str, name: str) -> dict[str, Any]:
    ws = workspace_by_name(client, workspace)
    found = client.get(f"/api/v1/workspaces/{ws['id']}/projects", name=name).get("projects") or []
    if not found:
        raise NotFound(f"workspace {ws['name']!r} has no project named {name!r}")
    return found[0]


@app.command("list")
def list_(
    ctx: typer.Context, workspace: str = typer.Argument(..., help="workspace name"), as_json: JsonFlag = False
) -> None:
    """List a workspace's projects."""
    client = client_of(ctx)
    ws = workspace_by_name(client, workspace)
    projects = client.paginate(f"/api/v1/workspaces/{ws['id']}/projects", "projects")
    if as_json:
        print_json(projects)
        return
    print_table(PROJECT_COLUMNS, project_rows(projects))


@app.command("create")
def create(
    ctx: typer.Context,
    workspace: str = typer.Argument(..., help="workspace name"),
    name: str = typer.Argument(..., help="a name no other project of the workspace has, in any case"),
    description: str | None = typer.Option(None, "--description", help="what the project is for"),
    key: str | None = typer.Option(None, "--key", help="1 to 5 letters or digits (default: from the name)"),
    as_json: JsonFlag = False,
) -> None:
    """Create a project of your own in a workspace (not Uncategorized, which takes none)."""
    client = client_of(ctx)
    ws = workspace_by_name(client, workspace)
    body = {"name": name, "workspaceId": ws["id"], "description": description, "key": key}
    project = client.post(f"/api/v1/workspaces/{ws['id']}/projects", body)["project"]
    if as_json:
        print_json(project)
        return
    say(
        f"Created project {project['name']} (id {project['id']}) in workspace {ws['name']}; "
        f"pedl experiment create --project {project['id']} puts experiments in it"
    )


@app.command("describe")
def describe(
    ctx: typer.Context,
    workspace: str = typer.Argument(..., help="workspace name"),
    name: str = typer.Argument(..., help="project name"),
    as_json: JsonFlag = False,
) -> None:
    """A project and its experiments."""
    client = client_of(ctx)
    project = project_by_name(client, workspace, name)
    experiments = client.paginate("/api/v1/experiments", "experiments", {"projectId": project["id"]})
    if as_json:
        print_json({"project": project, "experiments": experiments})
        return
    print_fields(
        [
            ("ID", project.get("id")),
            ("Name", project.get("name")),
            ("Key", project.get("key")),
            ("Workspace", project.get("workspaceName")),
            ("Description", project.get("description")),
            ("Owner", project.get("username")),
            ("Experiments", project.get("numExperiments")),
            ("Active experiments", project.get("numActiveExperiments")),
        ],
        title=f"Project {project.get('name')}",
    )
    print_table(
        ["ID", "Owner", "Name", "State", "Progress", "Started", "Ended"],
        [
            [
                e.get("id"),
                e.get("username"),
                e.get("name"),
                fmt_state(e.get("state")),
                fmt_percent(e.get("progress")),
                fmt_time(e.get("startTime")),
                fmt_time(e.get("endTime")),
            ]
            for e in experiments
        ],
        title="Experiments",
    )
