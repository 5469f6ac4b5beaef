"""`pedl shell start|open|list|logs|kill|tunnel`: an sshd on an agent, reached by ssh through the
master: `open` writes the shell's private key (GET /api/v1/shells/{id}, its owner only) to a 0600 file
and runs ssh with `pedl shell tunnel` as its ProxyCommand, which carries the connection over a
WebSocket to /proxy/{id}/ (shell_tunnel.py)."""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import typer

from pedl.cli import ntsc, shell_tunnel
from pedl.cli.auth_store import config_dir
from pedl.cli.client import MasterClient
from pedl.cli.output import fail, info, say
from pedl.cli.state import client_of, state_of
from pedl.common.master_trust import client_ssl_context

app = typer.Typer(no_args_is_help=True, help="Shells on the cluster, over ssh through the master.")
ntsc.add_common_verbs(app, ntsc.SHELL)

SshOpts = typer.Argument(None, metavar="[SSH_OPTS...]", help="more arguments for ssh (after --)")
ShowOption = typer.Option(
    False, "--show-ssh-command", help="print the ssh command (for an IDE) and keep the key; do not run it"
)
DEFAULT_SSH_USER = "root"  # as det: the shell's agentUserGroup.user where the master names one


def proxy_command(client: MasterClient, cert: str | None) -> str:
    """ssh's ProxyCommand: this Python running `pedl shell tunnel %h` (ssh puts the host, the shell's
    id, for %h) against the same master, as the same user."""
    argv = [sys.executable, "-m", "pedl.cli.main", "--master", client.url, "--user", client.username]
    if cert:
        argv += ["--cert", str(Path(cert).resolve())]
    quoted = [shlex.quote(a.replace("%", "%%")) for a in argv]  # ssh expands %-tokens in ProxyCommand
    return " ".join([*quoted, "shell", "tunnel", "%h"])


def ssh_argv(shell: dict[str, Any], key_path: Path, proxy: str, extra: list[str]) -> list[str]:
    user = (shell.get("agentUserGroup") or {}).get("user") or DEFAULT_SSH_USER
    # each shell has a host key of its own, reached by its id: nothing to remember in ~/.ssh/known_hosts
    return [
        "ssh",
        "-o",
        f"ProxyCommand={proxy}",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-i",
        str(key_path),
        f"{user}@{shell['id']}",
        *extra,
    ]


def write_key(path: Path, key: str) -> None:
    """The private key, readable by its owner only from the moment the file exists (ssh refuses others)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key if key.endswith("\n") else key + "\n")


@contextlib.contextmanager
def key_file(shell: dict[str, Any], keep: bool) -> Iterator[Path]:
    """The key in a private temporary directory removed afterwards, or, kept, under the config directory."""
    if "privateKey" not in shell:
        fail(f"the master sent no private key for shell {shell.get('id')}: only its owner (or an admin) opens it")
    key = str(shell["privateKey"] or "")
    if not key:
        fail(f"the master holds no ssh key for shell {shell.get('id')}")
    if keep:
        path = config_dir() / "shell" / str(shell["id"]) / "key"
        write_key(path, key)
        yield path
        return
    tmp = Path(tempfile.mkdtemp(prefix="pedl-shell-"))
    try:
        write_key(tmp / "key", key)
        yield tmp / "key"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def open_shell(ctx: typer.Context, shell_id: str, extra: list[str], show: bool) -> None:
    client = client_of(ctx)
    shell = ntsc.describe(client, ntsc.SHELL, shell_id)
    if shell.get("state") in ntsc.ENDED:
        fail(f"shell {shell_id} has ended" + (f" ({shell['exitStatus']})" if shell.get("exitStatus") else ""))
    if not shell.get("isReady"):
        ntsc.wait_ready(client, ntsc.SHELL, shell_id)
    if not show and shutil.which("ssh") is None:
        fail("ssh is not installed here (apt-get install openssh-client); --show-ssh-command prints the command")
    proxy = proxy_command(client, state_of(ctx).cert)
    with key_file(shell, keep=show) as key:
        argv = ssh_argv(shell, key, proxy, extra)
        if show:
            say(shlex.join(argv))
            return
        code = subprocess.run(argv, check=False).returncode
    info(f"To connect again: pedl shell open {shell_id}")
    raise typer.Exit(code)


@app.command("start")
def start(
    ctx: typer.Context,
    ssh_opts: list[str] | None = SshOpts,
    config: list[str] = ntsc.ConfigOption,
    config_file: Path | None = ntsc.ConfigFileOption,
    context: Path | None = ntsc.ContextOption,
    detach: bool = ntsc.DetachOption,
    workspace: str | None = ntsc.WorkspaceOption,
    template: str | None = ntsc.TemplateOption,
    show: bool = ShowOption,
) -> None:
    """Start a shell, wait until it is ready and connect to it with ssh (-d: print its id and return)."""
    client = client_of(ctx)
    body = ntsc.launch_body(
        client, config_file=config_file, config=config, context=context, workspace=workspace, template=template
    )
    shell = ntsc.launch(client, ntsc.SHELL, body)
    shell_id = str(shell.get("id"))
    if detach:
        say(shell_id)
        return
    info(f"Launched shell {shell_id} ({shell.get('description', '')})")
    ntsc.wait_ready(client, ntsc.SHELL, shell_id)
    open_shell(ctx, shell_id, list(ssh_opts or []), show)


@app.command("open")
def open_(
    ctx: typer.Context,
    shell_id: str = typer.Argument(..., metavar="ID", help="the shell's id"),
    ssh_opts: list[str] | None = SshOpts,
    show: bool = ShowOption,
) -> None:
    """Connect to a shell with ssh through the master (it waits until the shell is ready)."""
    [full] = ntsc.expand_ids(client_of(ctx), ntsc.SHELL, [shell_id])
    open_shell(ctx, full, list(ssh_opts or []), show)


@app.command("tunnel")
def tunnel(ctx: typer.Context, shell_id: str = typer.Argument(..., metavar="ID", help="the shell's id")) -> None:
    """ssh's ProxyCommand: carry stdin and stdout over a WebSocket to the shell through the master."""
    client = client_of(ctx)
    cert = state_of(ctx).cert
    context = client_ssl_context(cert) if client.url.startswith("https://") else None
    ws = shell_tunnel.open_tunnel(shell_tunnel.tunnel_url(client.url, shell_id), client.auth_headers(), context)
    raise typer.Exit(shell_tunnel.copy(ws, sys.stdin.fileno(), sys.stdout.fileno()))
