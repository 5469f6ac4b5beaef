"""Removing a checkpoint directory, or some entries of it, from local disk without ever following a
symlink. The standard library only: the master uses it, and a checkpoint GC task runs it shipped beside
its script as .pedl/pedl_local_removal.py (checkpoints/gc_tasks.py).

Every path is reached one directory at a time with O_NOFOLLOW, so a symlink swapped in for a directory
is refused (ValueError), never followed; directories are removed with rmtree relative to their parent's
descriptor, which unlinks links and never follows them. Entries already gone are not an error; any
other failure is an OSError."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Collection
from pathlib import Path

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def remove_entries(root: str | os.PathLike[str], entries: Collection[str]) -> None:
    """Delete `entries` of directory `root`: files, and directories ending in "/" (as the checkpoint's
    listing names them, pedl/common/checkpoint_files.py)."""
    root = Path(root)
    dirs = sorted({e.rstrip("/") for e in entries if e.endswith("/")}, key=lambda d: d.count("/"))
    gone: list[str] = []
    for rel in dirs:  # the shallowest first: rmtree takes the ones below with it
        if not any(rel.startswith(d + "/") for d in gone):
            _below(root, rel, _rmtree)
            gone.append(rel)
    for rel in sorted(e for e in entries if not e.endswith("/")):
        if not any(rel.startswith(d + "/") for d in gone):
            _below(root, rel, _unlink)


def remove_directory(path: str | os.PathLike[str]) -> None:
    """Delete directory `path` and everything in it (a `path` that is a symlink is refused: ValueError)."""
    path = Path(path)
    try:
        fd = os.open(path.parent, _DIR_FLAGS & ~os.O_NOFOLLOW)  # the parent as resolved by the master
    except FileNotFoundError:
        return
    try:
        _act(path.name, fd, _rmtree, path.name)
    finally:
        os.close(fd)


def _unlink(name: str, dir_fd: int) -> None:
    os.unlink(name, dir_fd=dir_fd)  # a link itself, never its target


def _rmtree(name: str, dir_fd: int) -> None:
    def gone_already(_func: object, _path: str, exc: BaseException) -> None:
        if not isinstance(exc, FileNotFoundError):
            raise exc

    # refuses a symlink (OSError: "Cannot call rmtree on a symbolic link"), never follows one
    if sys.version_info >= (3, 12):
        shutil.rmtree(name, onexc=gone_already, dir_fd=dir_fd)
    else:
        shutil.rmtree(name, onerror=lambda f, p, info: gone_already(f, p, info[1]), dir_fd=dir_fd)


def _act(name: str, fd: int, act: Callable[[str, int], None], rel: str) -> None:
    try:
        act(name, fd)
    except FileNotFoundError:
        return
    except ValueError:
        raise
    except OSError as exc:
        raise OSError(exc.errno, f"cannot delete {rel!r}: {exc.strerror or exc}") from None


def _below(root: Path, rel: str, act: Callable[[str, int], None]) -> None:
    """act(name, dir_fd) on entry `rel` of `root`, its parent opened one component at a time
    without following links. An entry (or a directory above it) already gone is skipped."""
    *dirs, name = rel.split("/")
    try:
        fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        return
    try:
        for part in dirs:
            try:
                inner = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                return
            except OSError as exc:
                raise ValueError(
                    f"cannot delete {rel!r}: {part!r} is not a directory inside the checkpoint ({exc.strerror or exc})"
                ) from None
            os.close(fd)
            fd = inner
        _act(name, fd, act, rel)
    finally:
        os.close(fd)
