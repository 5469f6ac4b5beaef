"""Deleting some entries of a checkpoint from its storage (shared_fs or S3), the entries named by its
own listing (CheckpointStorage.resources). On shared_fs every path is reached one directory at a time
with O_NOFOLLOW, so a symlink swapped in for a directory is refused, never followed, and directories
are removed with rmtree relative to their parent's descriptor, which unlinks links and never follows them."""

from __future__ import annotations

import os
import shutil
from collections.abc import Collection
from pathlib import Path

from pedl.common.checkpoint_storage import CheckpointStorage, S3Storage, SharedFSStorage, s3_error
from pedl.errors import Forbidden, InvalidArgument, PedlError


def remove_entries(storage: CheckpointStorage, uuid: str, entries: Collection[str]) -> None:
    """Delete `entries` (files, and directories ending in "/", as the listing names them) of
    checkpoint `uuid`. Entries already gone are not an error."""
    if not entries:
        return
    if isinstance(storage, SharedFSStorage):
        _remove_local(storage.checkpoint_dir(uuid), entries)
    elif isinstance(storage, S3Storage):
        _remove_s3(storage, uuid, entries)
    else:
        raise InvalidArgument(f"removing files from a checkpoint is not supported for {storage!r}")


def _remove_local(root: Path, entries: Collection[str]) -> None:
    dirs = sorted({e.rstrip("/") for e in entries if e.endswith("/")}, key=lambda d: d.count("/"))
    gone: list[str] = []
    for rel in dirs:  # the shallowest first: rmtree takes the ones below with it
        if not any(rel.startswith(d + "/") for d in gone):
            _below(root, rel, _rmtree)
            gone.append(rel)
    for rel in sorted(e for e in entries if not e.endswith("/")):
        if not any(rel.startswith(d + "/") for d in gone):
            _below(root, rel, _unlink)


def _unlink(name: str, dir_fd: int) -> None:
    os.unlink(name, dir_fd=dir_fd)  # a link itself, never its target


def _rmtree(name: str, dir_fd: int) -> None:
    def gone_already(_func: object, _path: str, info: tuple) -> None:
        if not isinstance(info[1], FileNotFoundError):
            raise info[1]

    shutil.rmtree(name, onerror=gone_already, dir_fd=dir_fd)  # refuses a symlink; never follows one


def _below(root: Path, rel: str, act) -> None:  # noqa: ANN001 - act(name, dir_fd)
    """act(name, dir_fd) on entry `rel` of `root`, its parent opened one component at a time
    without following links. An entry (or a directory above it) already gone is skipped."""
    *dirs, name = rel.split("/")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(root, flags)
    except FileNotFoundError:
        return
    try:
        for part in dirs:
            try:
                inner = os.open(part, flags, dir_fd=fd)
            except FileNotFoundError:
                return
            except OSError as exc:
                raise Forbidden(f"cannot delete {rel!r}: {part!r} is not a directory inside the checkpoint "
                                f"({exc.strerror or exc})") from None
            os.close(fd)
            fd = inner
        try:
            act(name, fd)
        except FileNotFoundError:
            return
        except OSError as exc:
            raise PedlError(f"cannot delete {rel!r} of the checkpoint: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _remove_s3(storage: S3Storage, uuid: str, entries: Collection[str]) -> None:
    base = storage.key_prefix(uuid)
    keys = sorted(base + e for e in entries)
    for start in range(0, len(keys), storage.DELETE_BATCH):
        batch = keys[start:start + storage.DELETE_BATCH]
        try:
            answer = storage.client.delete_objects(
                Bucket=storage.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
        except PedlError:
            raise
        except Exception as exc:
            mapped = s3_error(exc, "delete", storage.url(uuid), storage.bucket, storage.endpoint_url)
            if mapped is None:
                raise
            raise mapped from exc
        failed = answer.get("Errors") or []
        if failed:
            first = failed[0]
            more = f" (and {len(failed) - 1} more key(s))" if len(failed) > 1 else ""
            raise PedlError(f"cannot delete s3://{storage.bucket}/{first.get('Key')}: "
                            f"{first.get('Code', '')} {first.get('Message', '')}".rstrip() + more)
