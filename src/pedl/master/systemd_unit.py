"""The systemd unit that runs the master as a service (`pedl master install-service`): its text is
made here from the command line and the user, with no I/O, so tests read exactly what is written.

Stopping: systemd sends SIGTERM to the master's own process only (KillMode=process). The master
shuts down cleanly on SIGTERM and exits 0. The processes it started are left alone: a pool with a
`local` provider runs its agents as child processes (in their own sessions, listed in the data
directory's registry), and those agents and the trials they run keep going across a master stop or
restart, as EC2 instances do. The master finds them again when it starts. With the default
KillMode=control-group, systemd would kill every agent and trial of the service on each restart.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

UNIT_NAME = "pedl-master.service"
SYSTEM_UNIT_DIR = "/etc/systemd/system"
CONFIG_EXIT_STATUS = 2  # `pedl master run`'s status for an invalid config: restarting cannot fix it
STOP_TIMEOUT_S = 30  # the master's graceful shutdown takes about 5 s; then systemd sends SIGKILL

# a user name systemd accepts in User= (its "relaxed" rules, without the all-digit form)
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,30}[$]?$")
_BARE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")
OPEN_FILES = 65536  # the unit's LimitNOFILE


def quote_exec_arg(arg: str) -> str:
    """One word of ExecStart= as systemd reads it: `%` and `$` are escaped (specifiers and
    environment variables), and a word with other characters is double-quoted."""
    if not arg or any(c in arg for c in "\n\r\x00"):
        raise ValueError(f"{arg!r} cannot be a word of a systemd command line")
    text = arg.replace("%", "%%").replace("$", "$$")
    if _BARE.match(arg):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def check_user_name(user: str) -> str:
    """`user` when systemd can take it in User=; ValueError saying why not."""
    if not _USER.match(user):
        raise ValueError(
            f"{user!r} is not a valid user name (letters, digits, '_', '.', '-'; "
            "not starting with a digit or '-'; at most 32 characters)"
        )
    return user


def master_unit(pedl: Sequence[str], config: str, *, user: str | None = None, version: str = "") -> str:
    """The text of pedl-master.service. `pedl` is the command that starts this pedl (the absolute
    path of the `pedl` script next to the interpreter, or the interpreter with `-m`); `config` the
    absolute path of master.yaml."""
    if not pedl or not pedl[0].startswith("/"):
        raise ValueError(f"the pedl command must start with an absolute path, got {list(pedl)!r}")
    if not config.startswith("/"):
        raise ValueError(f"the config path must be absolute, got {config!r}")
    command = " ".join(quote_exec_arg(a) for a in [*pedl, "master", "run", "--config", config])
    written_by = f"pedl {version}" if version else "pedl"
    lines = [
        f"# Written by `pedl master install-service` ({written_by}); run it again rather than edit this file.",
        "[Unit]",
        "Description=pedl master (deep-learning training cluster)",
        "Wants=network-online.target",
        # a PostgreSQL on this host starts first; After= on a unit that does not exist is ignored
        "After=network-online.target postgresql.service",
        "",
        "[Service]",
        "Type=simple",
    ]
    if user is not None:
        lines.append(f"User={check_user_name(user)}")
    lines += [
        f"ExecStart={command}",
        "Environment=PYTHONUNBUFFERED=1",
        "Restart=on-failure",
        "RestartSec=5",
        f"RestartPreventExitStatus={CONFIG_EXIT_STATUS}",
        # see the module docstring: agents and trials the master started outlive a stop or restart
        "KillMode=process",
        "KillSignal=SIGTERM",
        # room for server.max_connections (4,096) besides the database and files: the master raises its soft
        # limit to this hard one at start, and fits its connection caps under it
        f"LimitNOFILE={OPEN_FILES}",
        f"TimeoutStopSec={STOP_TIMEOUT_S}",
        "StandardOutput=journal",
        "StandardError=journal",
        "SyslogIdentifier=pedl-master",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    return "\n".join(lines) + "\n"
