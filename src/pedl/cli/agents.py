"""`pedl agent run` starts an agent daemon in this process; `pedl agent list` shows connected agents;
`pedl agent enable|disable` (admins) let an agent take tasks or stop it taking them, and `pedl agent
forget` (admins) clears the credential of an agent that lost it.
The daemon's `--master` is its own option; the global `-m` is used when it is not given."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from pedl.cli.client import normalize_master_url
from pedl.cli.output import JsonFlag, fail, fmt_time, print_json, print_table
from pedl.cli.state import client_of, state_of

app = typer.Typer(no_args_is_help=True, help="Run or list agents.")

WORK_DIR_IN_USE_EXIT = 2  # another agent on this host has this one's id (and so its work dir)


@app.command("run")
def run(
    ctx: typer.Context,
    master: str | None = typer.Option(None, "--master", "-m", help="master URL (default: the global -m)"),
    agent_id: str | None = typer.Option(
        None, "--id", help="agent id (default: the host name); each agent on a host needs its own"
    ),
    resource_pool: str = typer.Option("default", "--resource-pool", help="pool to join"),
    slots: int | None = typer.Option(
        None, "--slots", min=0, help="CPU slots when no GPU is found (default 1; 0: none)"
    ),
    token: str | None = typer.Option(
        None,
        "--token",
        help="the master's agent token (its enrollment secret): master.yaml's agent_token when set, else the "
        "contents of <data_dir>/agent_token on the master's host. On the command line every process of "
        "this host can read it: prefer --token-file or PEDL_AGENT_TOKEN",
    ),
    token_file: Path | None = typer.Option(
        None,
        "--token-file",
        metavar="FILE",
        help="a file of mode 0600 holding the agent token (else PEDL_AGENT_TOKEN, which the agent removes from "
        "its environment). Needed until the master has issued this agent a credential of its own, which "
        "the agent keeps in its work dir",
    ),
    no_token: bool = typer.Option(
        False,
        "--no-token",
        help="connect without a token; only a development master with "
        "security.allow_unauthenticated_loopback_agents: true accepts this, and only from its own host",
    ),
    work_dir: Path | None = typer.Option(
        None, "--work-dir", help="where tasks run (default: ~/.local/share/pedl/agent/<id>); one agent at a time"
    ),
    spot_watch: bool = typer.Option(
        False, "--spot-watch", help="watch instance metadata for the spot interruption notice"
    ),
    imds_url: str | None = typer.Option(
        None, "--imds-url", envvar="PEDL_IMDS_URL", help="instance metadata service (default http://169.254.169.254)"
    ),
    cert: Path | None = typer.Option(
        None,
        "--cert",
        metavar="FILE",
        help="CA certificate (PEM) to verify an https:// master against (default: the global --cert, "
        "PEDL_MASTER_CERT, else the system's CAs); the agent's tasks are given it too",
    ),
    container_runtime: str | None = typer.Option(
        None,
        "--container-runtime",
        metavar="docker|none",
        help="run tasks that name an environment.image in Docker containers (docker), or take none (none); "
        "default: docker when a Docker daemon answers",
    ),
) -> None:
    """Run an agent in the foreground until SIGINT/SIGTERM.

    The master admits a new agent with its agent token (the enrollment secret) and issues it a
    credential of its own, which the agent keeps in its work dir and presents from then on; `--no-token`
    is for a development master that opted in to unauthenticated loopback agents."""
    import logging
    import os
    import sys

    from pedl.agent.connection import AgentRefused
    from pedl.agent.daemon import run_agent  # heavy imports only when an agent is run
    from pedl.agent.options import TOKEN_ENV, TOKEN_WHERE, AgentOptions, hide_in_cmdline
    from pedl.agent.work_dir_lock import WorkDirError, WorkDirInUse

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if no_token and (token or token_file or os.environ.get(TOKEN_ENV)):
        fail(f"--no-token and a token (--token, --token-file or {TOKEN_ENV}) contradict each other; give one")
    if token:
        hidden = hide_in_cmdline(token)
        logging.getLogger("pedl.agent").warning(
            "--token puts the agent token on the command line, which every process of this host can read in "
            "/proc/<pid>/cmdline%s; use --token-file FILE (mode 0600) or %s",
            " (overwritten there now, but it was readable until the agent started)" if hidden else "",
            TOKEN_ENV,
        )

    url = normalize_master_url(master or state_of(ctx).master)
    try:
        options = AgentOptions(
            master_url=url,
            agent_id=agent_id,
            resource_pool=resource_pool,
            slots=slots,
            token=token or None,
            token_file=token_file,
            work_dir=work_dir,
            spot_watch=spot_watch,
            imds_url=imds_url,
            cert=cert or state_of(ctx).cert,
            container_runtime=container_runtime,
        )
    except ValueError as exc:
        fail(str(exc))
    if not no_token and not options.token and not options.credential_path.is_file():
        fail(
            f"an agent needs the master's agent token: pass --token-file FILE or set {TOKEN_ENV}. "
            f"Where to find it: {TOKEN_WHERE}. (--no-token connects without one, which only a development "
            f"master with security.allow_unauthenticated_loopback_agents: true accepts, from its own host.)"
        )
    try:
        run_agent(options)
    except AgentRefused as exc:
        fail(str(exc))
    except WorkDirInUse as exc:
        fail(str(exc), WORK_DIR_IN_USE_EXIT)
    except WorkDirError as exc:
        fail(str(exc))


def slot_counts(agent: dict[str, Any]) -> tuple[int, int]:
    """(slots, slots in use) of an agent object."""
    slots = agent.get("slots") or {}
    used = sum(1 for s in slots.values() if isinstance(s, dict) and s.get("container"))
    return len(slots), used


@app.command("list")
def list_(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """List agents (GET /api/v1/agents)."""
    agents = client_of(ctx).get("/api/v1/agents").get("agents") or []
    if as_json:
        print_json(agents)
        return
    rows = []
    for a in agents:
        total, used = slot_counts(a)
        rows.append(
            [
                a.get("id"),
                fmt_time(a.get("registeredTime")),
                total,
                used,
                ", ".join(a.get("resourcePools") or []),
                a.get("enabled"),
                a.get("draining"),
                ", ".join(a.get("addresses") or []),
                a.get("containerRuntime") or "-",
            ]
        )
    print_table(
        [
            "Agent ID",
            "Registered",
            "Slots",
            "In use",
            "Resource pools",
            "Enabled",
            "Draining",
            "Addresses",
            "Containers",
        ],
        rows,
    )


@app.command("disable")
def disable(
    ctx: typer.Context,
    agent_id: str = typer.Argument(..., help="the agent's id"),
    drain: bool = typer.Option(
        False,
        "--drain",
        help="let its running tasks finish; without it they are preempted (checkpoint and queue again)",
    ),
) -> None:
    """Place no new task on an agent (admins; POST /api/v1/agents/ID/disable)."""
    agent = client_of(ctx).post(f"/api/v1/agents/{agent_id}/disable", {"drain": drain}).get("agent") or {}
    typer.echo(
        f"agent {agent_id} disabled" + (" (draining: its tasks run to their end)" if agent.get("draining") else "")
    )


@app.command("forget")
def forget(ctx: typer.Context, agent_id: str = typer.Argument(..., help="the agent's id")) -> None:
    """Forget an agent's credential, for an agent that lost its credential file (admins; POST
    /api/v1/agents/ID/forget): the agent token then registers the id again, and the agent gets a new one."""
    client_of(ctx).post(f"/api/v1/agents/{agent_id}/forget", {})
    typer.echo(f"agent {agent_id}: credential forgotten; the agent token registers it again")


@app.command("enable")
def enable(ctx: typer.Context, agent_id: str = typer.Argument(..., help="the agent's id")) -> None:
    """Let an agent take tasks again (admins; POST /api/v1/agents/ID/enable)."""
    client_of(ctx).post(f"/api/v1/agents/{agent_id}/enable", {})
    typer.echo(f"agent {agent_id} enabled")
