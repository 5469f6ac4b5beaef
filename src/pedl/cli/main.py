"""The `pedl` Typer app: global options, one sub-app per resource, and error reporting.
Expected errors (pedl.errors) print one red line and exit 1; there is no traceback for them."""

from __future__ import annotations

from typing import Any

import typer
from typer.core import TyperGroup

from pedl.cli import (
    agents,
    checkpoints,
    commands,
    deploy,
    experiments,
    jobs,
    master,
    model_registry,
    notebooks,
    projects,
    resource_pools,
    shells,
    sim,
    slots,
    tasks,
    templates,
    tensorboards,
    trials,
    users,
    workspaces,
)
from pedl.cli.client import DEFAULT_MASTER, MASTER_ENV
from pedl.cli.output import error_line
from pedl.cli.state import CliState
from pedl.common.master_trust import MASTER_CERT_ENV
from pedl.errors import PedlError


class PedlGroup(TyperGroup):
    """Root group: every subcommand runs inside its `invoke`, so expected errors are caught here."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except PedlError as exc:
            error_line(exc.message)
            raise typer.Exit(1) from None
        finally:
            if isinstance(ctx.obj, CliState):
                ctx.obj.close()


app = typer.Typer(
    cls=PedlGroup,
    name="pedl",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,  # locals can hold tokens and passwords
    add_completion=False,
    help="pedl: a deep-learning training cluster (Determined-compatible).",
)


@app.callback()
def _global_options(
    ctx: typer.Context,
    master_url: str = typer.Option(
        DEFAULT_MASTER, "-m", "--master", envvar=[MASTER_ENV, "DET_MASTER"], help="master URL (host:port is fine)"
    ),
    user: str | None = typer.Option(
        None, "-u", "--user", envvar="PEDL_USER", help="act as this user (default: the logged-in user)"
    ),
    cert: str | None = typer.Option(
        None,
        "--cert",
        envvar=MASTER_CERT_ENV,
        metavar="FILE",
        help="CA certificate (PEM) to verify an https:// master against, instead of the system's CAs",
    ),
) -> None:
    ctx.obj = CliState(master=master_url, user=user, cert=cert)


app.add_typer(master.app, name="master")
app.add_typer(agents.app, name="agent")
app.add_typer(slots.app, name="slot")
app.add_typer(tasks.app, name="task")
app.add_typer(jobs.app, name="job")
app.add_typer(users.app, name="user")
app.add_typer(experiments.app, name="experiment")
app.add_typer(experiments.app, name="e", hidden=True)
app.add_typer(trials.app, name="trial")
app.add_typer(trials.app, name="t", hidden=True)
app.add_typer(checkpoints.app, name="checkpoint")
app.add_typer(model_registry.app, name="model")
app.add_typer(workspaces.app, name="workspace")
app.add_typer(projects.app, name="project")
app.add_typer(templates.app, name="template")
app.add_typer(commands.app, name="cmd")
app.add_typer(commands.app, name="command", hidden=True)
app.add_typer(notebooks.app, name="notebook")
app.add_typer(shells.app, name="shell")
app.add_typer(tensorboards.app, name="tensorboard")
app.add_typer(deploy.app, name="deploy")
app.command("sim")(sim.sim)
app.add_typer(resource_pools.app, name="resource-pool")
app.add_typer(resource_pools.instances_app, name="instance")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
