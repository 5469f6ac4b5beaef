"""`pedl master run` starts a master in this process; `pedl master info|config` ask a running one.
Config problems exit with status 2 and name the file and field paths."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pedl.cli.output import JsonFlag, fail, fmt_enum, print_fields, print_json, say
from pedl.cli.state import client_of
from pedl.errors import InvalidArgument, NotFound

if TYPE_CHECKING:
    from pedl.config.master_config import MasterConfig

app = typer.Typer(no_args_is_help=True, help="Run or inspect the master.")

CONFIG_EXIT = 2


def build_master_config(config: Path | None, port: int | None, data_dir: Path | None) -> MasterConfig:
    """Load master.yaml and apply command-line overrides, validating the result as a whole."""
    from pydantic import ValidationError  # config models load only for commands that need them

    from pedl.config.loading import describe_validation_error
    from pedl.config.master_config import MasterConfig, load_master_config

    cfg = load_master_config(config)
    overrides: dict[str, Any] = {}
    if port is not None:
        overrides["port"] = port
    if data_dir is not None:
        overrides["data_dir"] = data_dir
    if not overrides:
        return cfg
    try:
        return MasterConfig.model_validate({**cfg.model_dump(), **overrides})
    except ValidationError as exc:
        raise describe_validation_error(exc, "command-line options") from None


@app.command("run")
def run(
    config: Path | None = typer.Option(None, "--config", "-c", help="master.yaml"),
    port: int | None = typer.Option(None, "--port", help="HTTP port (overrides the config)"),
    data_dir: Path | None = typer.Option(None, "--data-dir", help="data directory (overrides the config)"),
) -> None:
    """Run a master in the foreground until SIGINT/SIGTERM."""
    try:
        cfg = build_master_config(config, port, data_dir)
    except InvalidArgument as exc:  # ConfigError: names the file and every field at fault
        fail(exc.message, CONFIG_EXIT)
    from pedl.master.server import run_master  # heavy imports only when a master is run

    run_master(cfg)


# GET /api/v1/master's fields, as `master info` names them; other fields follow under their own names
INFO_FIELDS = {"version": "Version", "clusterName": "Cluster name", "clusterId": "Cluster ID",
               "masterId": "Master ID", "product": "Product", "database": "Database",
               "resourcePools": "Resource pools", "userManagementEnabled": "User management",
               "rbacEnabled": "RBAC", "strictJobQueueControl": "Strict job queue control",
               "telemetryEnabled": "Telemetry", "featureSwitches": "Feature switches"}
INFO_HIDDEN = frozenset({"hasCustomLogo"})  # the web UI's concern


def info_rows(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """Labelled rows, enums in words; a field that says nothing (an UNSPECIFIED enum, an empty list) is left out."""
    rows = []
    for key in [*INFO_FIELDS, *(k for k in body if k not in INFO_FIELDS and k not in INFO_HIDDEN)]:
        if key not in body:
            continue
        value = body[key]
        if isinstance(value, str):
            value = fmt_enum(value) if key != "clusterName" else value or "(none)"
        elif isinstance(value, list):
            value = ", ".join(str(v) for v in value)
        if value != "":
            rows.append((INFO_FIELDS.get(key, key), value))
    return rows


@app.command("info")
def info(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show the master's version, ids, database and pools (GET /api/v1/master)."""
    client = client_of(ctx)
    body = client.get("/api/v1/master")
    if as_json:
        print_json(body)
        return
    print_fields(info_rows(body), title=f"Master {client.url}")


@app.command("config")
def config_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show the running master's configuration (GET /api/v1/master/config)."""
    try:
        body = client_of(ctx).get("/api/v1/master/config")
    except NotFound:
        fail("this master does not serve its configuration (GET /api/v1/master/config)")
    cfg = body.get("config", body)
    if as_json:
        print_json(cfg)
    else:
        import yaml

        say(yaml.safe_dump(cfg, sort_keys=False).rstrip())
