"""The cluster's enrollment secret, which admits an agent id that has no credential of its own yet
(agents/credentials.py): master.yaml's `agent_token`, or else one the master creates on first
start in `data_dir/agent_token` (owner-only) and reads back on later starts."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import secrets
import stat
from pathlib import Path

from pedl.config.master_config import MasterConfig
from pedl.errors import Unavailable

log = logging.getLogger(__name__)

TOKEN_FILE = "agent_token"


def token_path(data_dir: Path) -> Path:
    return data_dir / TOKEN_FILE


def resolve_agent_token(config: MasterConfig) -> str:
    """The token this master accepts from agents. Raises Unavailable when the token file is unsafe
    (readable or writable by others, not ours, or a symlink): a token that others could read may
    already have leaked, so the master refuses to start rather than keep using it."""
    if config.agent_token:
        return config.agent_token
    path = token_path(config.data_dir)
    config.data_dir.mkdir(parents=True, exist_ok=True)
    token = _read(path)
    if token is None:
        try:
            token = _create(path)
        except FileExistsError:  # another master on this data directory made it first
            token = _read(path)
            if token is None:
                raise Unavailable(f"cannot create the agent token file {path}") from None
            return token
        log.info(
            "created the agent token in %s; static agents need it (pedl agent run --token, or PEDL_AGENT_TOKEN)", path
        )
    return token


def _read(path: Path) -> str | None:
    """The stored token; None when there is none yet (or an empty file, left by a crash while it was
    being written, which is removed so that a new token replaces it)."""
    try:
        # O_NOFOLLOW: a symlink planted in the data directory must not choose our secret
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Unavailable(
                f"the agent token file {path} is a symlink; remove it (a new token is then "
                f"created) or set agent_token in master.yaml"
            ) from None
        raise Unavailable(f"cannot read the agent token file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r") as f:
        info = os.fstat(f.fileno())  # of the file we opened, not of whatever the path names later
        _check_safe(path, info)
        token = f.read().strip()
    if not token:
        log.warning("the agent token file %s is empty; creating a new token", path)
        path.unlink()
        return None
    return token


def _check_safe(path: Path, info: os.stat_result) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise Unavailable(f"the agent token file {path} is not a regular file")
    if info.st_uid != os.geteuid():
        raise Unavailable(
            f"the agent token file {path} belongs to uid {info.st_uid}, not to the master's "
            f"user (uid {os.geteuid()}); remove it (a new token is then created)"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise Unavailable(
            f"the agent token file {path} has mode {mode:03o}: other users may read or change it. "
            f"Run `chmod 600 {path}` if no one else can have read it, or remove it to create a "
            f"new token (agents then need the new one)"
        )


def _create(path: Path) -> str:
    token = secrets.token_urlsafe(32)
    # O_EXCL with mode 0600 at creation: the file is never readable by others, not even for a moment
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (token + "\n").encode())
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)
    return token
