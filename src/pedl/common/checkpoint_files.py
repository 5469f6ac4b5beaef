"""The files of a checkpoint directory on local disk, read without ever following a symlink:
the listing leaves links and special files out, and files open one path component at a time."""

from __future__ import annotations

import os
import stat
from pathlib import Path


def list_directory(root: Path) -> dict[str, int]:
    """`{relative posix path: size}` of the regular files and directories under root; directories
    end in "/" (size 0). Symlinks (dangling or not, to files or directories) and special files are
    left out and never followed; an entry that vanishes while it is listed is left out too."""
    out: dict[str, int] = {}
    pending = [(root, "")]
    while pending:
        directory, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except FileNotFoundError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                out[f"{prefix}{entry.name}/"] = 0
                pending.append((Path(entry.path), f"{prefix}{entry.name}/"))
            elif stat.S_ISREG(info.st_mode):
                out[f"{prefix}{entry.name}"] = info.st_size
    return out


def open_below(root: Path, rel: str) -> int:
    """A read-only descriptor of regular file `rel` under directory `root`, opened one component at
    a time with O_NOFOLLOW, so no symlink (even one swapped in meanwhile) is followed. O_NONBLOCK
    keeps a FIFO from blocking the open; anything but a regular file raises OSError."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(root, flags | os.O_DIRECTORY)
    try:
        *dirs, name = rel.split("/")
        for part in dirs:
            inner = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        file_fd = os.open(name, flags | os.O_NONBLOCK, dir_fd=fd)
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(file_fd).st_mode):
        os.close(file_fd)
        raise OSError(0, "not a regular file")
    os.set_blocking(file_fd, True)
    return file_fd
