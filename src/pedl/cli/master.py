"""`pedl master run` starts a master in this process, `check-config` validates a master.yaml and
`install-service` makes the master a systemd service; `pedl master info|config|logs` ask a running one.
Config problems exit with status 2 (1 for check-config) and name the file and field paths."""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from pedl.cli.output import JsonFlag, err, error_line, fail, fmt_enum, fmt_time, print_fields, print_json, say
from pedl.cli.output import info as note
from pedl.cli.state import client_of
from pedl.config.master_config_paths import config_search_paths, find_master_config
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
    """Run a master in the foreground until SIGINT/SIGTERM. Without --config, the first of
    /usr/local/pedl/etc/master.yaml and /etc/pedl/master.yaml that exists, else the defaults."""
    config = config or found_config()
    try:
        cfg = build_master_config(config, port, data_dir)
    except InvalidArgument as exc:  # ConfigError: names the file and every field at fault
        fail(exc.message, CONFIG_EXIT)
    # no cyclic garbage collection while the master imports and starts: its modules, routes, schemas and
    # mappers live as long as the process, and collections scanning them as they grow took ~20% of a start's
    # CPU. server.tune_runtime collects once and freezes what is loaded, then turns collection back on.
    gc.disable()
    from pedl.master.server import run_master  # heavy imports only when a master is run

    run_master(cfg)


def searched() -> str:
    return " or ".join(str(p) for p in config_search_paths()) or "no default path (PEDL_CONFIG_PATHS is empty)"


def found_config() -> Path | None:
    """The default config file, saying on stderr (the service's journal) which one, or that there is none."""
    path = find_master_config()
    if path is None:
        note(f"no config file at {searched()}: running on the defaults")
    else:
        note(f"config: {path}")
    return path


def _problem_lines(header: str, problems: list[tuple[str, str]]) -> None:
    error_line(header)
    for field, message in problems:
        err().print(f"  {field}: {message}", markup=False, highlight=False)


@app.command("check-config")
def check_config(
    config: Path | None = typer.Argument(
        None, metavar="FILE", help="master.yaml (default: the file `master run` would use)"
    ),
) -> None:
    """Validate a master.yaml without starting anything: print what it configures and exit 0, or
    print each problem with the field at fault and exit 1."""
    from pedl.config.loading import ConfigError
    from pedl.config.master_config import load_master_config
    from pedl.master.config_check import config_summary, start_problems

    path = config or find_master_config()
    if path is None:
        fail(f"no config file given, and none at {searched()}")
    try:
        cfg = load_master_config(path)
    except ConfigError as exc:
        fields = [(f["field"], f["message"]) for f in exc.fields if f.get("field") != "<root>"]
        if not fields:
            fail(exc.message)
        _problem_lines(f"{path}: {len(fields)} problem(s)", fields)
        raise typer.Exit(1) from None
    problems = start_problems(cfg)
    if problems:
        _problem_lines(f"{path}: valid, but a master would not start on it: {len(problems)} problem(s)", problems)
        raise typer.Exit(1)
    print_fields(config_summary(cfg), title=f"{path}: OK")


@app.command("install-service")
def install_service(
    config: Path | None = typer.Option(
        None, "--config", "-c", help="master.yaml the service runs (default: the file `master run` would use)"
    ),
    user: str | None = typer.Option(None, "--user", help="run the master as this user (default: root)"),
    unit_dir: Path = typer.Option(Path("/etc/systemd/system"), "--unit-dir", help="where to write the unit"),
    no_enable: bool = typer.Option(False, "--no-enable", help="write the unit only; no systemctl"),
) -> None:
    """Write the systemd unit pedl-master.service and enable and start it (systemctl daemon-reload,
    enable --now). It restarts the master on failure and logs to the journal
    (journalctl -u pedl-master); a stop sends SIGTERM to the master only, so agents and trials it
    started keep running."""
    from pedl.cli.master_service import check_service_user, enable_unit, write_unit
    from pedl.config.master_config import load_master_config
    from pedl.devcluster import pedl_command
    from pedl.master.systemd_unit import master_unit
    from pedl.version import __version__

    path = config or find_master_config()
    if path is None:
        fail(f"--config: no config file given, and none at {searched()}", CONFIG_EXIT)
    path = Path(os.path.abspath(path))
    try:
        load_master_config(path)  # a service that cannot start would only restart, again and again
    except InvalidArgument as exc:
        fail(f"{exc.message} (check it with `pedl master check-config {path}`)", CONFIG_EXIT)
    if user is not None:
        check_service_user(user)
    try:
        text = master_unit(pedl_command(), str(path), user=user, version=__version__)
    except ValueError as exc:  # a path systemd cannot take (a newline in it)
        fail(str(exc))
    unit = write_unit(Path(os.path.abspath(unit_dir)), text)
    say(f"wrote {unit}")
    if no_enable:
        say("not enabled (--no-enable); to start it: systemctl daemon-reload && systemctl enable --now pedl-master")
        return
    enable_unit(unit)
    say("pedl-master is enabled and started; its log: journalctl -u pedl-master -f")


# GET /api/v1/master's fields, as `master info` names them; other fields follow under their own names
INFO_FIELDS = {
    "pedlVersion": "Version",
    "version": "Determined API",
    "clusterName": "Cluster name",
    "clusterId": "Cluster ID",
    "masterId": "Master ID",
    "product": "Product",
    "userManagementEnabled": "User management",
    "rbacEnabled": "RBAC",
    "strictJobQueueControl": "Strict job queue control",
    "telemetryEnabled": "Telemetry",
    "featureSwitches": "Feature switches",
}
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
    """Show the master's version, ids and cluster name (GET /api/v1/master; no login needed)."""
    client = client_of(ctx)
    body = client.request("GET", "/api/v1/master", auth=False)
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


@app.command("logs")
def logs(
    ctx: typer.Context,
    follow: bool = typer.Option(False, "--follow", "-f", help="keep printing new records until interrupted"),
    tail: int | None = typer.Option(None, "--tail", min=1, help="only the last N records"),
) -> None:
    """Print the master's recent log records (GET /api/v1/master/logs; admins only). The master keeps
    its last 10,000 records in memory, from its start."""
    params: dict[str, Any] = {"follow": follow}
    if tail is not None:
        params["offset"] = -tail
    for record in client_of(ctx).stream_ndjson("/api/v1/master/logs", params):
        entry = record.get("logEntry") or {}
        say(f"{fmt_time(entry.get('timestamp'))} {fmt_enum(entry.get('level')):<8} {entry.get('message', '')}")
