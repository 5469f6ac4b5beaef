"""`pedl master install-service`'s doing: write pedl-master.service (text from
master/systemd_unit.py) and enable it with systemctl; each failure says what was done and what was not."""

from __future__ import annotations

import errno
import shutil
import subprocess
from pathlib import Path

from pedl.errors import InvalidArgument, Unavailable
from pedl.master.systemd_unit import UNIT_NAME, check_user_name

SYSTEMCTL_TIMEOUT_S = 120  # `enable --now` waits for the start job; Type=simple makes that quick
ENABLE_COMMANDS = (["daemon-reload"], ["enable", "--now", UNIT_NAME.removesuffix(".service")])


def check_service_user(user: str) -> str:
    """`user` when it is a valid name and exists on this machine; InvalidArgument naming --user otherwise."""
    import pwd

    try:
        check_user_name(user)
    except ValueError as exc:
        raise InvalidArgument(f"--user: {exc}", fields=[{"field": "--user", "message": str(exc)}]) from None
    try:
        pwd.getpwnam(user)
    except KeyError:
        raise InvalidArgument(
            f"--user: there is no user {user!r} on this machine (create it first, e.g. `useradd --system {user}`)",
            fields=[{"field": "--user", "message": "no such user"}],
        ) from None
    return user


def write_unit(unit_dir: Path, text: str) -> Path:
    """Write the unit into `unit_dir` (replacing an older one whole, never half-written); its path."""
    if not unit_dir.is_dir():
        raise InvalidArgument(
            f"--unit-dir: {unit_dir} is not a directory", fields=[{"field": "--unit-dir", "message": "not a directory"}]
        )
    path = unit_dir / UNIT_NAME
    tmp = unit_dir / f".{UNIT_NAME}.tmp"
    try:
        tmp.write_text(text)
        tmp.chmod(0o644)
        tmp.replace(path)
    except OSError as exc:
        hint = " (run it as root, e.g. with sudo)" if exc.errno in (errno.EACCES, errno.EPERM) else ""
        raise Unavailable(f"cannot write {path}: {exc.strerror}{hint}") from None
    return path


def enable_unit(unit_path: Path) -> None:
    """`systemctl daemon-reload` and `systemctl enable --now pedl-master`; Unavailable saying which
    step failed and that the unit is written, when systemctl is missing or fails."""
    manual = " && ".join("systemctl " + " ".join(args) for args in ENABLE_COMMANDS)
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        raise Unavailable(
            f"systemctl not found: this host does not seem to run systemd, so the service is not "
            f"enabled. The unit is written at {unit_path}; on a systemd host run `{manual}`"
        )
    for args in ENABLE_COMMANDS:
        shown = "systemctl " + " ".join(args)
        try:
            done = subprocess.run(
                [systemctl, *args],
                capture_output=True,
                text=True,
                timeout=SYSTEMCTL_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise Unavailable(f"`{shown}` did not run: {exc}. The unit is written at {unit_path}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip() or "no message"
            raise Unavailable(
                f"`{shown}` failed with status {done.returncode}: {said}. The unit is written at "
                f"{unit_path}; fix the cause and run `{manual}`"
            )
