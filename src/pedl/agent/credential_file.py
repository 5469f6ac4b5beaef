"""The agent's own credential, which the master issues at its first registration: kept in the work dir in
a file only the agent's user may read (mode 0600, written whole or not at all), presented on every connection."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def read_credential(path: Path) -> str | None:
    """The stored credential; None when there is none (a new agent, or a lost file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd) as f:
        return f.read().strip() or None


def write_credential(path: Path, credential: str) -> None:
    """Store it atomically: a new file made with mode 0600 (never readable by others, even for a moment),
    synced, then renamed over the old one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        os.write(fd, (credential + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
