"""The master's data_dir and the SQLite database in it, readable by the master's user only: the database
holds shells' private keys, notebook tokens and every user's password hash, and data_dir the agent token.
A data_dir the master creates is 0711: others may not list it, but the tasks of every user (each its own
uid) may pass through it to the default checkpoint storage, data_dir/checkpoints, which the agent makes
1777. Its secrets are files of mode 0600: the database and its -wal, -shm and -journal files, the agent
token, the console socket."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PRIVATE_DIR = 0o711  # traversable, not listable: see the module docstring
PRIVATE_FILE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")  # SQLite makes these with the database's own mode


def make(path: Path) -> None:
    """Create data_dir (PRIVATE_DIR) where it is missing (its parents as the umask says); one that exists is
    the operator's and keeps its mode."""
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            path.mkdir(mode=PRIVATE_DIR)


def private_database(path: Path) -> None:
    """Make the SQLite file owner-only before SQLite opens it: created 0600 where missing (never readable
    by others, even for a moment), and an existing one (an older master's, 0644) and its companions set to
    0600. SQLite then creates the -wal and -shm files 0600 too."""
    make(path.parent)
    with contextlib.suppress(FileExistsError):
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE))
    for file in (path, *(path.with_name(path.name + suffix) for suffix in SQLITE_COMPANIONS)):
        with contextlib.suppress(FileNotFoundError):
            if os.stat(file, follow_symlinks=False).st_mode & 0o077:
                os.chmod(file, PRIVATE_FILE, follow_symlinks=False)
