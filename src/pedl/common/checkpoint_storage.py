"""Where checkpoint files live: one interface, built from an experiment's `checkpoint_storage`.

Tasks (through pedl.core) write and read checkpoints with it; the master uses it to delete them
and to stream them to `pedl checkpoint download`.

A checkpoint is its regular files and directories. Symlinks (and FIFOs, sockets, devices) are not
part of it: `list_directory` skips them, so they are neither reported, uploaded nor downloaded, and
the master never follows one (it opens files with O_NOFOLLOW on every path component, deletes a
link and never its target, and refuses a checkpoint directory that is itself a link).
"""

from __future__ import annotations

import abc
import contextlib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Protocol

from pedl.common.checkpoint_files import list_directory, open_below
from pedl.common.s3_errors import s3_code_error, s3_error
from pedl.errors import Forbidden, InvalidArgument, NotFound, PedlError

_UNSUPPORTED = {
    "gcs": "gcs checkpoint storage is not supported (use shared_fs or s3)",
    "azure": "azure checkpoint storage is not supported (use shared_fs or s3)",
}


class CheckpointNotFound(NotFound, FileNotFoundError):
    """A checkpoint that is not in its storage: a pedl NotFound (404 over the API) and, as
    restore_path has always raised, a FileNotFoundError."""


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

    @contextlib.contextmanager
    def open_file(self, uuid: str, path: str) -> Iterator[BinaryIO]:
        """One file of a checkpoint (`path` as `resources` names it), opened for reading.

        Storages that can read a single file cheaply override this; the default restores the
        whole checkpoint first."""
        rel = _check_relpath(path)
        with self.restore_path(uuid) as root, open(root / rel, "rb") as f:
            yield f


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
                    f"checkpoint_storage.storage_path {storage_path!r} must be inside host_path {str(host)!r}"
                )
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
            raise CheckpointNotFound(f"checkpoint {uuid} not found in {self.base_path}")
        yield path

    def checkpoint_dir(self, uuid: str) -> Path:
        """`path_of(uuid)`, refused (Forbidden) when it is a symlink: it could point anywhere."""
        path = self.path_of(uuid)
        if path.is_symlink():
            raise Forbidden(f"checkpoint {uuid}: {path} is a symbolic link; pedl does not follow it")
        return path

    @contextlib.contextmanager
    def open_file(self, uuid: str, path: str) -> Iterator[BinaryIO]:
        """A regular file of the checkpoint, reached without following any symlink (a link swapped
        in after the listing is refused, not followed)."""
        rel = _check_relpath(path)
        try:
            fd = open_below(self.checkpoint_dir(uuid), rel)
        except FileNotFoundError:
            raise CheckpointNotFound(f"file {path!r} of checkpoint {uuid} not found in {self.base_path}") from None
        except OSError as exc:
            raise Forbidden(
                f"file {path!r} of checkpoint {uuid} is not a regular file inside it ({exc.strerror})"
            ) from None
        with os.fdopen(fd, "rb") as f:
            yield f

    def resources(self, uuid: str) -> dict[str, int]:
        path = self.checkpoint_dir(uuid)
        if not path.is_dir():
            return {}
        return list_directory(path)

    def exists(self, uuid: str) -> bool:
        path = self.path_of(uuid)
        return path.is_dir() and not path.is_symlink()

    def delete(self, uuid: str) -> None:
        """Remove the checkpoint's directory. rmtree unlinks symlinks inside it and never follows
        them; a checkpoint directory that is itself a symlink is refused."""
        path = self.checkpoint_dir(uuid)

        def gone_already(_func: object, _path: str, exc: BaseException) -> None:
            if not isinstance(exc, FileNotFoundError):  # something else removed it first: fine
                raise exc

        if sys.version_info >= (3, 12):
            shutil.rmtree(path, onexc=gone_already)
        else:
            shutil.rmtree(path, onerror=lambda func, p, info: gone_already(func, p, info[1]))


class S3Storage(TransferStorage):
    """Checkpoints in an S3 bucket (or an S3-compatible store): `s3://<bucket>/<prefix>/<uuid>/<path>`.

    Directories are empty keys ending in "/", as Determined writes them, so `resources` lists the
    same entries as shared_fs. Credentials come from boto3's usual chain (environment, shared
    config, instance profile). Every boto3 failure is raised as a pedl error naming the bucket and
    key: NotFound, Forbidden (credentials, access), Unavailable (network, throttling) or PedlError.
    """

    DELETE_BATCH = 1000  # S3's limit for one DeleteObjects call

    def __init__(
        self,
        bucket: str,
        *,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str | None = None,
        client: Any = None,
    ) -> None:
        self.bucket = bucket
        self.prefix = "/".join(p for p in prefix.split("/") if p)
        self.endpoint_url = endpoint_url
        self.region = region
        self._client = client

    def __repr__(self) -> str:
        where = f" at {self.endpoint_url}" if self.endpoint_url else ""
        return f"S3Storage('s3://{self.bucket}/{self.prefix}'{where})"

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            # custom endpoints (MinIO, moto) rarely resolve <bucket>.<host>: use path-style URLs there
            config = Config(
                retries={"max_attempts": 5, "mode": "standard"},
                s3={"addressing_style": "path"} if self.endpoint_url else None,
            )
            # a session per storage: boto3's default session is not safe to share across threads
            self._client = boto3.Session().client(
                "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
            )
        return self._client

    def key_prefix(self, uuid: str) -> str:
        """The key prefix of one checkpoint, ending in "/"."""
        _check_uuid(uuid)
        return f"{self.prefix}/{uuid}/" if self.prefix else f"{uuid}/"

    def url(self, uuid: str, path: str = "") -> str:
        return f"s3://{self.bucket}/{self.key_prefix(uuid)}{path}"

    def _keys(self, uuid: str, action: str) -> Iterator[tuple[str, int]]:
        """(key, size) of every object of the checkpoint."""
        base = self.key_prefix(uuid)
        with self._errors(action, self.url(uuid)):
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=base):
                for obj in page.get("Contents") or []:
                    yield obj["Key"], int(obj.get("Size") or 0)

    def upload(self, src: Path, uuid: str) -> None:
        base = self.key_prefix(uuid)
        for rel in sorted(list_directory(src)):
            key = base + rel
            with self._errors("upload to", f"s3://{self.bucket}/{key}"):
                if rel.endswith("/"):
                    self.client.put_object(Bucket=self.bucket, Key=key, Body=b"")
                else:
                    self.client.upload_file(str(src / rel), self.bucket, key)

    def download(self, uuid: str, dst: Path) -> None:
        base = self.key_prefix(uuid)
        found = False
        for key, _size in self._keys(uuid, "list"):
            found = True
            rel = key[len(base) :]
            if not rel:
                continue
            target = dst / _check_relpath(rel.rstrip("/"))
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with self._errors("download", f"s3://{self.bucket}/{key}"):
                self.client.download_file(self.bucket, key, str(target))
        if not found:
            raise CheckpointNotFound(f"checkpoint {uuid} not found in {self.url(uuid)}")

    def resources(self, uuid: str) -> dict[str, int]:
        base = self.key_prefix(uuid)
        return {key[len(base) :]: size for key, size in self._keys(uuid, "list") if key != base}

    def exists(self, uuid: str) -> bool:
        base = self.key_prefix(uuid)
        with self._errors("list", self.url(uuid)):
            answer = self.client.list_objects_v2(Bucket=self.bucket, Prefix=base, MaxKeys=1)
        return bool(answer.get("KeyCount") or answer.get("Contents"))

    def delete(self, uuid: str) -> None:
        keys = [key for key, _size in self._keys(uuid, "delete")]
        for start in range(0, len(keys), self.DELETE_BATCH):
            batch = keys[start : start + self.DELETE_BATCH]
            with self._errors("delete", self.url(uuid)):
                answer = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
                )
            failed = answer.get("Errors") or []
            if failed:
                first = failed[0]
                raise s3_code_error(
                    first.get("Code", ""),
                    first.get("Message", ""),
                    0,
                    "delete",
                    f"s3://{self.bucket}/{first.get('Key')}",
                    self.bucket,
                    more=len(failed) - 1,
                )

    @contextlib.contextmanager
    def open_file(self, uuid: str, path: str) -> Iterator[BinaryIO]:
        key = self.key_prefix(uuid) + _check_relpath(path)
        with self._errors("read", f"s3://{self.bucket}/{key}"):
            body = self.client.get_object(Bucket=self.bucket, Key=key)["Body"]
        try:
            yield body
        finally:
            body.close()

    @contextlib.contextmanager
    def _errors(self, action: str, where: str) -> Iterator[None]:
        try:
            yield
        except PedlError:
            raise
        except Exception as exc:
            mapped = s3_error(exc, action, where, self.bucket, self.endpoint_url)
            if mapped is None:
                raise
            raise mapped from exc


class ConfigModel(Protocol):
    """A config model (pydantic's, which this module does not import: the Core API loads it in tasks)."""

    def model_dump(self) -> dict[str, Any]: ...


def storage_from_config(config: Mapping[str, Any] | ConfigModel) -> CheckpointStorage:
    """Build the storage an experiment's (or master's) `checkpoint_storage` section describes.

    Accepts the config model's dump or a plain dict; keys other than the type's own (the save_*
    retention policy, for instance) are ignored here.
    """
    if not isinstance(config, Mapping):
        config = config.model_dump()
    kind = config.get("type") or "shared_fs"
    if kind == "shared_fs":
        host_path = config.get("host_path")
        if not host_path:
            raise InvalidArgument("checkpoint_storage.host_path is required for shared_fs storage")
        return SharedFSStorage(host_path, config.get("storage_path"))
    if kind == "directory":  # as a task sees it (the master reaches it as shared_fs: master_view)
        container_path = config.get("container_path")
        if not container_path:
            raise InvalidArgument("checkpoint_storage.container_path is required for directory storage")
        return SharedFSStorage(container_path, None)
    if kind == "s3":
        bucket = config.get("bucket")
        if not bucket:
            raise InvalidArgument("checkpoint_storage.bucket is required for s3 storage")
        return S3Storage(
            bucket,
            prefix=config.get("prefix") or "",
            endpoint_url=config.get("endpoint_url"),
            region=config.get("region"),
        )
    if kind in _UNSUPPORTED:
        raise InvalidArgument(_UNSUPPORTED[kind])
    raise InvalidArgument(f"unknown checkpoint_storage.type {kind!r}")


def _check_uuid(uuid: str) -> None:
    # The uuid becomes a path component: refuse anything that could escape the base directory.
    if not uuid or uuid in (".", "..") or "/" in uuid or "\\" in uuid or "\x00" in uuid:
        raise ValueError(f"invalid checkpoint uuid {uuid!r}")


def _check_relpath(path: str) -> str:
    """A relative posix path inside a checkpoint; anything that could leave it is refused."""
    parts = PurePosixPath(path).parts
    if not parts or path.startswith("/") or "\x00" in path or any(p in ("..", ".") for p in parts):
        raise ValueError(f"invalid path {path!r} inside a checkpoint")
    return "/".join(parts)
