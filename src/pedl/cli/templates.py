"""`pedl template set|list|describe|remove`: config templates, merged under the config of an
experiment created with `pedl experiment create --template NAME` (/api/v1/templates)."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import typer
import yaml

from pedl.cli.output import JsonFlag, fail, print_json, print_table, say
from pedl.cli.state import client_of
from pedl.errors import NotFound

app = typer.Typer(no_args_is_help=True, help="Config templates for experiments.")


def read_template(path: Path) -> dict[str, Any]:
    """The template file's mapping (YAML or JSON), read within the usual config limits."""
    from pedl.config.loading import parse_yaml_text  # pydantic: load on use

    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"cannot read the template {path}: {exc.strerror}")
    config = parse_yaml_text(text, str(path))
    if not isinstance(config, dict):
        fail(f"the template {path} must be a mapping of experiment config keys")
    return config


def url(name: str) -> str:
    return f"/api/v1/templates/{quote(name, safe='')}"


def dump(config: Any) -> str:
    return yaml.safe_dump(config, default_flow_style=False, sort_keys=False)


@app.command("set")
def set_(
    ctx: typer.Context,
    name: str = typer.Argument(..., help="template name"),
    file: Path = typer.Argument(..., help="the template's config (YAML)"),
) -> None:
    """Create the template NAME, or replace its config, from FILE."""
    config = read_template(file)
    client = client_of(ctx)
    try:
        client.get(url(name))
    except NotFound:
        client.post(url(name), {"name": name, "config": config, "workspaceId": 0})
        say(f"Created template {name}")
        return
    client.request("PATCH", url(name), json=config)
    say(f"Set template {name}")


@app.command("list")
def list_(
    ctx: typer.Context,
    details: bool = typer.Option(False, "--details", "-d", help="show their configs"),
    as_json: JsonFlag = False,
) -> None:
    """List the templates."""
    client = client_of(ctx)
    templates = client.paginate("/api/v1/templates", "templates")
    if as_json:
        print_json(templates)
        return
    workspaces = {w["id"]: w["name"] for w in client.paginate("/api/v1/workspaces", "workspaces")}
    columns = ["Name", "Workspace", "Owner"] + (["Config"] if details else [])
    print_table(
        columns,
        [
            [t["name"], workspaces.get(t.get("workspaceId"), t.get("workspaceId")), t.get("username")]
            + ([dump(t.get("config"))] if details else [])
            for t in templates
        ],
    )


@app.command("describe")
def describe(
    ctx: typer.Context, name: str = typer.Argument(..., help="template name"), as_json: JsonFlag = False
) -> None:
    """Print a template's config (YAML)."""
    template = client_of(ctx).get(url(name))["template"]
    if as_json:
        print_json(template)
        return
    typer.echo(dump(template.get("config")), nl=False)


@app.command("remove")
def remove(ctx: typer.Context, name: str = typer.Argument(..., help="template name")) -> None:
    """Remove a template of yours (experiments made with it keep their configs)."""
    client_of(ctx).request("DELETE", url(name))
    say(f"Removed template {name}")
