"""Where checkpoint files live: one interface, built from an experiment's `checkpoint_storage`.

Tasks (through pedl.core) write and read checkpoints with it; the master uses it to delete them.
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pedl.errors import InvalidArgument

_UNSUPPORTED_YET = {"s3": "s3 checkpoint storage is not supported yet (planned)",
                    "gcs": "gcs checkpoint storage is not supported"}


class CheckpointStorage(abc.ABC):
    """A place that holds checkpoints, each a directory of files named by the checkpoint's uuid.

    `store_path(uuid)` yields a local directory to write into; the checkpoint is complete when the
    block exits without an exception (on an exception nothing is kept). `restore_path(uuid)` yields
    a local directory holding the checkpoint's files; treat it as read-only. `resources(uuid)`
    lists `{relative path: size in bytes}` (directories end in "/" with size 0, as in Determined).
    `delete(uuid)` is idempotent: deleting a missing checkpoint is not an error.
    """

    @abc.abstractmethod
    def store_path(self, uuid: str) -> contextlib.AbstractContextManager[Path]: ...

    @abc.abstractmethod
    def restore_path(self, uuid: str) -> contextlib.AbstractContextManager[Path]: ...

    @abc.abstractmethod
    def resources(self, uuid: str) -> dict[str, int]: ...

    @abc.abstractmethod
    def delete(self, uuid: str) -> None: ...

    def exists(self, uuid: str) -> bool:
        return bool(self.resources(uuid))


class TransferStorage(CheckpointStorage):
    """Base for storage that is not a local filesystem (S3 and the like).

    Subclasses move whole directories: `upload(src, uuid)` and `download(uuid, dst)`. Writing and
    reading happen in a temporary local directory that is removed afterwards.
    """

    @abc.abstractmethod
    def upload(self, src: Path, uuid: str) -> None: ...

    @abc.abstractmethod
    def download(self, uuid: str, dst: Path) -> None: ...

    @contextlib.contextmanager
    def store_path(self, uuid: str) -> Iterator[Path]:
        _check_uuid(uuid)
        with tempfile.TemporaryDirectory(prefix=f"pedl-ckpt-{uuid}-") as tmp:
            path = Path(tmp)
            yield path
            self.upload(path, uuid)

    @contextlib.contextmanager
    def restore_path(self, uuid: str) -> Iterator[Path]:
        _check_uuid(uuid)
        with tempfile.TemporaryDirectory(prefix=f"pedl-ckpt-{uuid}-") as tmp:
            path = Path(tmp)
            self.download(uuid, path)
            yield path


class SharedFSStorage(CheckpointStorage):
    """Checkpoints in a directory every task and the master can see: `<base>/<uuid>/`.

    The base is `host_path`, or `host_path/storage_path` when a storage_path is given. Tasks write
    in place, so storing costs no copy.
    """

    def __init__(self, host_path: str | os.PathLike[str], storage_path: str | None = None) -> None:
        host = Path(host_path).expanduser().resolve()
        base = host
        if storage_path:
            base = (host / Path(storage_path).expanduser()).resolve()
            if base != host and host not in base.parents:
                raise InvalidArgument(
                    f"checkpoint_storage.storage_path {storage_path!r} must be inside host_path {str(host)!r}")
        self.host_path = host
        self.base_path = base

    def __repr__(self) -> str:
        return f"SharedFSStorage({str(self.base_path)!r})"

    def path_of(self, uuid: str) -> Path:
        _check_uuid(uuid)
        return self.base_path / uuid

    @contextlib.contextmanager
    def store_path(self, uuid: str) -> Iterator[Path]:
        path = self.path_of(uuid)
        path.mkdir(parents=True, exist_ok=False)
        try:
            yield path
        except BaseException:
            # A half-written checkpoint must not look like a real one.
            shutil.rmtree(path, ignore_errors=True)
            raise

    @contextlib.contextmanager
    def restore_path(self, uuid: str) -> Iterator[Path]:
        path = self.path_of(uuid)
        if not path.is_dir():
            raise FileNotFoundError(f"checkpoint {uuid} not found in {self.base_path}")
        yield path

    def resources(self, uuid: str) -> dict[str, int]:
        path = self.path_of(uuid)
        if not path.is_dir():
            return {}
        return list_directory(path)

    def exists(self, uuid: str) -> bool:
        return self.path_of(uuid).is_dir()

    def delete(self, uuid: str) -> None:
        shutil.rmtree(self.path_of(uuid), ignore_errors=True)


def list_directory(root: Path) -> dict[str, int]:
    """`{relative posix path: size}` of everything under root; directories end in "/" (size 0)."""
    out: dict[str, int] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = Path(dirpath).relative_to(root)
        for name in sorted(dirnames):
            out[(rel_dir / name).as_posix() + "/"] = 0
        for name in sorted(filenames):
            full = Path(dirpath) / name
            out[(rel_dir / name).as_posix()] = full.stat().st_size
    return out


def storage_from_config(config: Mapping[str, Any]) -> CheckpointStorage:
    """Build the storage an experiment's (or master's) `checkpoint_storage` section describes.

    Accepts the config model's dump or a plain dict; keys other than the type's own (the save_*
    retention policy, for instance) are ignored here.
    """
    if hasattr(config, "model_dump"):
        config = config.model_dump()  # type: ignore[union-attr]
    kind = config.get("type") or "shared_fs"
    if kind == "shared_fs":
        host_path = config.get("host_path")
        if not host_path:
            raise InvalidArgument("checkpoint_storage.host_path is required for shared_fs storage")
        return SharedFSStorage(host_path, config.get("storage_path"))
    if kind in _UNSUPPORTED_YET:
        raise InvalidArgument(_UNSUPPORTED_YET[kind])
    raise InvalidArgument(f"unknown checkpoint_storage.type {kind!r}")


def _check_uuid(uuid: str) -> None:
    # The uuid becomes a path component: refuse anything that could escape the base directory.
    if not uuid or uuid in (".", "..") or "/" in uuid or "\\" in uuid or "\x00" in uuid:
        raise ValueError(f"invalid checkpoint uuid {uuid!r}")
