"""Runs a shell task's sshd as the task's own user, on the port the service launcher chose: a host key
of its own and a config in the task directory, and the shell's public key the only one that opens it.

The standard library only: it travels in the task's context as .pedl/shell_sshd.py and runs with
whatever python3 the task has (it needs OpenSSH's sshd and ssh-keygen there, as Determined's images
have). The master starts it through the launcher (task_kinds.py, shell_tasks.py):

    python3 .pedl/service_launcher.py -- python3 .pedl/shell_sshd.py {port}

sshd runs in the foreground and logs to stderr (-D -e), so "Server listening on ..." is in the task's
log. A session opened through it gets the task's environment (DET_MASTER, its token, PATH, ...) by
`environment=` options on the key, as Determined's shells do.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import sys
from pathlib import Path

PUBLIC_KEY_VAR = "PEDL_SHELL_PUBLIC_KEY"
STATE_DIR = ".pedl/sshd"
SSHD_CANDIDATES = ("/usr/sbin/sshd", "/usr/local/sbin/sshd", "/sbin/sshd")
PRIVSEP_DIR = "/run/sshd"  # Debian's; sshd started as root needs it, and a container may not have it
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# set by sshd for the session, or of this process only: not passed on
NOT_PASSED = frozenset(
    {
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "TERM",
        "MAIL",
        "PEDL_SERVICE_PORT",
        PUBLIC_KEY_VAR,
    }
)


def sshd_config(directory: str, user: str, *, root: bool) -> str:
    """The config: public keys only, and only this key file and this user; no PAM (it would need
    root), StrictModes off (the task directory's modes are the agent's)."""
    lines = [
        f"HostKey {directory}/host_ed25519_key",
        f"AuthorizedKeysFile {directory}/authorized_keys",
        f"PidFile {directory}/sshd.pid",
        f"AllowUsers {user}",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "ChallengeResponseAuthentication no",
        "HostbasedAuthentication no",
        "PermitEmptyPasswords no",
        "UsePAM no",
        "StrictModes no",
        "PermitUserEnvironment yes",
        "PrintMotd no",
        "X11Forwarding no",
        "Subsystem sftp internal-sftp",
        # a session whose client is gone (its tunnel cut without a close) ends within a minute
        "ClientAliveInterval 15",
        "ClientAliveCountMax 4",
    ]
    if root:
        lines.append("PermitRootLogin prohibit-password")
    return "\n".join(lines) + "\n"


def environment_options(env: dict[str, str]) -> tuple[str, list[str]]:
    """The key's `environment="NAME=value"` options for the task's variables, and the names left out
    (a value with a newline or a double quote cannot be written there)."""
    options, skipped = [], []
    for name in sorted(env):
        if name in NOT_PASSED or name.startswith("SSH_") or not NAME.fullmatch(name):
            continue
        value = env[name]
        if any(c in value for c in '\n\r"\0'):
            skipped.append(name)
            continue
        options.append(f'environment="{name}={value}"')
    return ",".join(options), skipped


def authorized_keys(public_key: str, env: dict[str, str]) -> tuple[str, list[str]]:
    options, skipped = environment_options(env)
    key = public_key.strip()
    return (f"{options} {key}\n" if options else f"{key}\n"), skipped


def find_sshd() -> str | None:
    found = shutil.which("sshd")
    if found:
        return os.path.abspath(found)  # sshd re-executes itself, which needs an absolute path
    return next((p for p in SSHD_CANDIDATES if os.access(p, os.X_OK)), None)


def _fail(message: str) -> int:
    print(f"pedl: {message}", file=sys.stderr, flush=True)
    return 1


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        return _fail("usage: shell_sshd.py PORT")
    public_key = os.environ.get(PUBLIC_KEY_VAR, "").strip()
    if not public_key:
        return _fail(f"{PUBLIC_KEY_VAR} is not set: the master gives each shell its key")
    sshd = find_sshd()
    keygen = shutil.which("ssh-keygen") or next((p for p in ("/usr/bin/ssh-keygen",) if os.access(p, os.X_OK)), None)
    if sshd is None or keygen is None:
        return _fail(
            "a shell needs OpenSSH's sshd and ssh-keygen in the task's environment "
            "(Debian: apt-get install openssh-server)"
        )
    try:
        user = pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return _fail(
            f"uid {os.getuid()} has no name in /etc/passwd, so sshd cannot log anyone in as it "
            "(create the user on the agent's host, or link the owner with an agent user that exists)"
        )
    root = os.geteuid() == 0
    directory = Path(STATE_DIR).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    directory.chmod(0o700)
    host_key = directory / "host_ed25519_key"
    if not host_key.exists():
        made = subprocess.run(
            [keygen, "-q", "-t", "ed25519", "-N", "", "-C", "pedl-shell-host", "-f", str(host_key)],
            stdin=subprocess.DEVNULL,
            check=False,
        )  # OpenSSH's own tool
        if made.returncode != 0:
            return _fail(f"ssh-keygen could not make the shell's host key in {directory} (exit {made.returncode})")
    keys, skipped = authorized_keys(public_key, dict(os.environ))
    _write(directory / "authorized_keys", keys)
    if skipped:
        print(
            f"pedl: the shell's sessions do not get {', '.join(skipped)} (a value with a newline or a double quote)",
            file=sys.stderr,
            flush=True,
        )
    config = directory / "sshd_config"
    _write(config, sshd_config(str(directory), user, root=root))
    if root and not os.path.isdir(PRIVSEP_DIR):
        os.makedirs(PRIVSEP_DIR, mode=0o755, exist_ok=True)
    print(f"pedl: sshd accepts the shell's key for user {user} on port {argv[0]}", flush=True)
    os.execv(sshd, [sshd, "-D", "-e", "-p", argv[0], "-f", str(config)])  # sshd replaces this process
    return 1  # not reached


def _write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
