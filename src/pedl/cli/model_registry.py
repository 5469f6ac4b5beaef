"""`pedl model create|list|describe|list-versions|register-version|move|archive|unarchive|delete|delete-version`
over /api/v1/models: the model registry, whose versions are checkpoints (`det model` works the same)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import typer

from pedl.cli.output import JsonFlag, fmt_state, fmt_time, print_fields, print_json, print_table, say
from pedl.cli.state import client_of

app = typer.Typer(no_args_is_help=True, help="The model registry: models and their versions (checkpoints).")

SORTS = ("name", "description", "creation_time", "last_updated_time", "num_versions")


def model_path(name: str) -> str:
    return f"/api/v1/models/{quote(name, safe='')}"


def _model_fields(model: dict[str, Any]) -> list[tuple[str, Any]]:
    return [
        ("ID", model.get("id")),
        ("Name", model.get("name")),
        ("Description", model.get("description")),
        ("Owner", model.get("username")),
        ("Workspace ID", model.get("workspaceId")),
        ("Labels", ", ".join(model.get("labels") or [])),
        ("Metadata", model.get("metadata") or {}),
        ("Versions", model.get("numVersions")),
        ("Archived", model.get("archived")),
        ("Created", fmt_time(model.get("creationTime"))),
        ("Updated", fmt_time(model.get("lastUpdatedTime"))),
    ]


def _version_rows(versions: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for v in versions:
        ckpt = v.get("checkpoint") or {}
        training = ckpt.get("training") or {}
        rows.append(
            [
                v.get("version"),
                v.get("name"),
                ckpt.get("uuid"),
                training.get("experimentId"),
                training.get("trialId"),
                (ckpt.get("metadata") or {}).get("steps_completed"),
                fmt_state(ckpt.get("state")),
                v.get("username"),
                fmt_time(v.get("creationTime")),
            ]
        )
    return rows


VERSION_COLUMNS = [
    "Version",
    "Name",
    "Checkpoint",
    "Experiment",
    "Trial",
    "Steps",
    "Checkpoint state",
    "By",
    "Registered",
]


@app.command("list")
def list_(
    ctx: typer.Context,
    name: str | None = typer.Option(None, "--name", help="only models whose name contains this"),
    label: list[str] = typer.Option([], "--label", "-l", help="only models with this label; repeatable"),
    archived: bool | None = typer.Option(None, "--archived/--unarchived", help="only archived, or only not"),
    workspace: list[str] = typer.Option([], "--workspace", "-w", help="only in this workspace; repeatable"),
    sort_by: str = typer.Option("name", "--sort-by", help=f"one of {', '.join(SORTS)}"),
    desc: bool = typer.Option(False, "--desc", help="in descending order"),
    as_json: JsonFlag = False,
) -> None:
    """List the registry's models (GET /api/v1/models)."""
    if sort_by not in SORTS:
        raise typer.BadParameter(f"{sort_by!r} is not one of {', '.join(SORTS)}", param_hint="--sort-by")
    params = {
        "name": name,
        "labels": label or None,
        "archived": archived,
        "workspaceNames": workspace or None,
        "sortBy": f"SORT_BY_{sort_by.upper()}",
        "orderBy": "ORDER_BY_DESC" if desc else "ORDER_BY_ASC",
    }
    found = client_of(ctx).paginate("/api/v1/models", "models", params)
    if as_json:
        print_json(found)
        return
    print_table(
        ["ID", "Name", "Description", "Versions", "Labels", "Owner", "Archived", "Updated"],
        [
            [
                m.get("id"),
                m.get("name"),
                m.get("description"),
                m.get("numVersions"),
                ", ".join(m.get("labels") or []),
                m.get("username"),
                m.get("archived"),
                fmt_time(m.get("lastUpdatedTime")),
            ]
            for m in found
        ],
    )


@app.command("create")
def create(
    ctx: typer.Context,
    name: str,
    description: str | None = typer.Option(None, "--description", "-d"),
    label: list[str] = typer.Option([], "--label", "-l", help="a label; repeatable"),
    workspace: str | None = typer.Option(None, "--workspace", "-w", help="default: Uncategorized"),
    as_json: JsonFlag = False,
) -> None:
    """Create a model, owned by you (POST /api/v1/models)."""
    model = (
        client_of(ctx)
        .post(
            "/api/v1/models",
            {"name": name, "description": description, "labels": label or None, "workspaceName": workspace},
        )
        .get("model")
        or {}
    )
    if as_json:
        print_json(model)
        return
    say(f"Created model '{model.get('name')}' (id {model.get('id')})")


@app.command("describe")
def describe(
    ctx: typer.Context, name: str = typer.Argument(..., help="the model's name or id"), as_json: JsonFlag = False
) -> None:
    """Show a model and its latest version."""
    client = client_of(ctx)
    model = client.get(model_path(name)).get("model") or {}
    latest = (
        client.get(f"{model_path(name)}/versions", limit=1, sortBy="SORT_BY_VERSION", orderBy="ORDER_BY_DESC").get(
            "modelVersions"
        )
        or []
    )
    if as_json:
        print_json({"model": model, "latestVersion": latest[0] if latest else None})
        return
    print_fields(_model_fields(model), title=f"Model {model.get('name')}")
    if latest:
        print_table(VERSION_COLUMNS, _version_rows(latest), title="Latest version")


@app.command("list-versions")
def list_versions(
    ctx: typer.Context, name: str = typer.Argument(..., help="the model's name or id"), as_json: JsonFlag = False
) -> None:
    """List a model's versions, the newest first."""
    versions = client_of(ctx).paginate(
        f"{model_path(name)}/versions", "modelVersions", {"sortBy": "SORT_BY_VERSION", "orderBy": "ORDER_BY_DESC"}
    )
    if as_json:
        print_json(versions)
        return
    print_table(VERSION_COLUMNS, _version_rows(versions), title=f"Versions of {name}")


@app.command("register-version")
def register_version(
    ctx: typer.Context,
    name: str,
    checkpoint_uuid: str,
    version_name: str | None = typer.Option(None, "--name", help="a name for the version"),
    comment: str | None = typer.Option(None, "--comment"),
    as_json: JsonFlag = False,
) -> None:
    """Register a COMPLETED checkpoint as the model's next version (garbage collection keeps it)."""
    body = {"checkpointUuid": checkpoint_uuid, "name": version_name, "comment": comment}
    version = (
        client_of(ctx)
        .post(f"{model_path(name)}/versions", {k: v for k, v in body.items() if v is not None})
        .get("modelVersion")
        or {}
    )
    if as_json:
        print_json(version)
        return
    say(
        f"Registered checkpoint {checkpoint_uuid} as version {version.get('version')} of model "
        f"'{(version.get('model') or {}).get('name', name)}'"
    )


@app.command("move")
def move(ctx: typer.Context, name: str, workspace: str = typer.Option(..., "--workspace", "-w")) -> None:
    """Move a model into another workspace."""
    model = client_of(ctx).request("PATCH", model_path(name), json={"workspaceName": workspace}).get("model") or {}
    say(f"Model '{name}' is in workspace {workspace!r} (id {model.get('workspaceId')})")


def _set_archived(ctx: typer.Context, name: str, archived: bool) -> None:
    client_of(ctx).post(f"{model_path(name)}/{'archive' if archived else 'unarchive'}")
    say(f"Model '{name}' {'archived' if archived else 'unarchived'}")


@app.command("archive")
def archive(ctx: typer.Context, name: str) -> None:
    """Archive a model: it takes no new versions until unarchived."""
    _set_archived(ctx, name, True)


@app.command("unarchive")
def unarchive(ctx: typer.Context, name: str) -> None:
    """Unarchive a model."""
    _set_archived(ctx, name, False)


@app.command("delete")
def delete(ctx: typer.Context, name: str, yes: bool = typer.Option(False, "--yes", "-y", help="do not ask")) -> None:
    """Delete a model and all its versions; the checkpoints stay, under their experiments' policies."""
    if not yes:
        typer.confirm(f"Delete model '{name}' and all its versions?", abort=True)
    client_of(ctx).request("DELETE", model_path(name))
    say(f"Deleted model '{name}'")


@app.command("delete-version")
def delete_version(
    ctx: typer.Context, name: str, version: int, yes: bool = typer.Option(False, "--yes", "-y", help="do not ask")
) -> None:
    """Delete one version of a model; its checkpoint stays."""
    if not yes:
        typer.confirm(f"Delete version {version} of model '{name}'?", abort=True)
    client_of(ctx).request("DELETE", f"{model_path(name)}/versions/{version}")
    say(f"Deleted version {version} of model '{name}'")
