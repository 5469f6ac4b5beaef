"""What master.yaml and experiment configs share about `checkpoint_storage`: the s3 location fields,
the discriminator of the storage union (a section without `type` is shared_fs), and the syntax of a
storage root (`security.checkpoint_storage_roots`).

An experiment may also use Determined's `directory` storage: a path as its tasks see it
(`container_path`). The master reaches the same files at `host_path`, worked out when the experiment
is created (`directory_host_path`), and treats such a section as shared_fs there (`master_view`)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Discriminator, Field, field_validator

from pedl.config.loading import StrictModel

# S3's naming rules (3-63 characters, lower case, digits, dots, hyphens); a bad name would
# otherwise surface as an opaque error from the first task that stores a checkpoint.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def absolute_host_path(value: str | None) -> str | None:
    """An experiment's shared_fs `host_path`, refused unless absolute: a relative one would be judged
    against the working directory of the master and of each agent, each a different place (master.yaml's
    own is checked at start, in master/config_check.py)."""
    if value is not None and (not value.startswith("/") or "\x00" in value):
        raise ValueError(f"{value!r} must be an absolute path")
    return value


def storage_type(value: Any) -> str:
    """The union tag of a checkpoint_storage section: its `type`, shared_fs when absent."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind or "shared_fs"


def storage_discriminator(*names: str) -> Discriminator:
    """The discriminator of a `checkpoint_storage` union of models tagged by `storage_type` (`names`), so
    errors name the fields of the chosen type only. The union is written out where it is used, so that
    type checkers see its members."""
    return Discriminator(
        storage_type,
        custom_error_type="invalid_storage_type",
        custom_error_message="type must be one of: " + ", ".join(names),
    )


def directory_host_path(container_path: str, container: dict[str, Any] | None) -> str | None:
    """Where the files a task writes at `container_path` are on its host: the path itself for a process
    task (it sees the host's files), else below the host_path of the bind mount that covers it (the
    innermost); None when no bind mount does (they would go with the container)."""
    if container is None:
        return container_path
    target = os.path.normpath(container_path)
    best: tuple[int, str] | None = None
    for mount in container.get("bind_mounts") or []:
        inside = os.path.normpath(str(mount["container_path"]))
        if target == inside or target.startswith(inside.rstrip("/") + "/"):
            rest = os.path.relpath(target, inside)
            host = os.path.normpath(os.path.join(str(mount["host_path"]), rest))
            if best is None or len(inside) > best[0]:
                best = (len(inside), host)
    return best[1] if best is not None else None


def experiment_storage(config: Any, default: Any = None) -> dict[str, Any]:
    """Where the master reaches an experiment's checkpoints: its config's checkpoint_storage (`default`,
    the master's own, for a config without one), as `master_view` gives it."""
    section = config.get("checkpoint_storage") if isinstance(config, dict) else None
    return master_view(dict(section or default or {}))


def master_view(storage: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint_storage section as the master reaches it: a directory section is shared_fs at its
    host_path (its container_path where none was worked out); others are as they are."""
    if storage.get("type") != "directory":
        return storage
    policy = {k: v for k, v in storage.items() if k.startswith("save_")}
    return {
        **policy,
        "type": "shared_fs",
        "host_path": storage.get("host_path") or storage.get("container_path"),
        "storage_path": None,
    }


class S3Location(StrictModel):
    """Where S3 checkpoints go: `s3://<bucket>/<prefix>/<uuid>/...`. Credentials come from the
    standard AWS chain (environment, shared config, instance profile), never from the config."""

    type: Literal["s3"]
    bucket: str = Field(..., description="S3 bucket that holds the checkpoints")
    prefix: str = Field(default="", description="key prefix inside the bucket, e.g. 'pedl/checkpoints'")
    endpoint_url: str | None = Field(default=None, description="S3-compatible endpoint (MinIO, moto); default AWS")
    region: str | None = Field(default=None, description="AWS region of the bucket; default from the environment")

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        if not _BUCKET.match(v):
            raise ValueError(f"{v!r} is not a valid S3 bucket name (3-63 characters: a-z, 0-9, '.', '-')")
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        parts = [p for p in v.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError("must not contain '.' or '..' segments")
        return "/".join(parts)

    @field_validator("endpoint_url")
    @classmethod
    def _endpoint(cls, v: str | None) -> str | None:
        if v is not None and not re.match(r"^https?://[^/\s]+", v):
            raise ValueError("must be an http:// or https:// URL")
        return v


def merge_storage(master: dict[str, Any], experiment: dict[str, Any] | None) -> dict[str, Any]:
    """An experiment's effective checkpoint_storage (plain dicts, as model_dump(mode="json") makes).

    Fields the experiment leaves out (None) come from the master's section when both are of the
    same type; a different type replaces the master's section and must be complete on its own.
    A section without `type` is the master's type, unless it names host_path/storage_path. An s3
    section always has its own bucket and prefix (a prefix left out is the bucket's root)."""
    if experiment is None:
        return dict(master)
    given = {k: v for k, v in experiment.items() if v is not None}
    kind = given.get("type") or (
        "shared_fs" if {"host_path", "storage_path"} & given.keys() else master.get("type") or "shared_fs"
    )
    if kind == (master.get("type") or "shared_fs"):
        return {**master, **given, "type": kind}
    policy = {k: v for k, v in master.items() if k.startswith("save_")}
    out = {**policy, **given, "type": kind}
    if kind == "shared_fs" and not out.get("host_path"):
        from pedl.errors import InvalidArgument

        raise InvalidArgument(
            f"checkpoint_storage.host_path: required, because the master's storage is {master.get('type')}",
            fields=[{"field": "checkpoint_storage.host_path", "message": "required"}],
        )
    return out


@dataclass(frozen=True)
class StorageRoot:
    """A place where checkpoints may live: a directory (shared_fs) or an S3 bucket and key prefix."""

    type: Literal["shared_fs", "s3"]
    path: str = ""  # shared_fs: an absolute directory, as written (the master resolves it)
    bucket: str = ""
    prefix: str = ""  # s3: key prefix without leading or trailing "/"; "" is the whole bucket

    def __str__(self) -> str:
        if self.type == "s3":
            return f"s3://{self.bucket}/{self.prefix}" if self.prefix else f"s3://{self.bucket}"
        return self.path


def parse_storage_root(text: str) -> StorageRoot:
    """One entry of `security.checkpoint_storage_roots`: an absolute directory or s3://bucket[/prefix].
    Raises ValueError saying what is wrong."""
    if not isinstance(text, str) or not text or "\x00" in text:
        raise ValueError(f"{text!r} is not a storage root (an absolute directory or s3://bucket[/prefix])")
    if text.startswith("s3://"):
        bucket, _, prefix = text[len("s3://") :].partition("/")
        if not _BUCKET.match(bucket):
            raise ValueError(f"{text!r}: {bucket!r} is not a valid S3 bucket name")
        parts = [p for p in prefix.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise ValueError(f"{text!r}: the prefix must not contain '.' or '..' segments")
        return StorageRoot("s3", bucket=bucket, prefix="/".join(parts))
    if "://" in text:
        raise ValueError(f"{text!r}: only s3:// roots are supported besides directories")
    path = os.path.expanduser(text)
    if not os.path.isabs(path):
        raise ValueError(f"{text!r}: a directory root must be an absolute path")
    return StorageRoot("shared_fs", path=os.path.normpath(path))


def storage_root_of(storage: dict[str, Any]) -> StorageRoot:
    """The root a checkpoint_storage section (a plain dict) stores under: its shared_fs directory
    (host_path joined with storage_path) or its s3 bucket and prefix."""
    if (storage.get("type") or "shared_fs") == "s3":
        return StorageRoot(
            "s3",
            bucket=str(storage.get("bucket") or ""),
            prefix="/".join(p for p in str(storage.get("prefix") or "").split("/") if p),
        )
    host = os.path.expanduser(str(storage.get("host_path") or ""))
    sub = os.path.expanduser(str(storage.get("storage_path") or ""))
    return StorageRoot("shared_fs", path=os.path.join(host, sub) if sub else host)


def as_determined(config: Any) -> Any:
    """An experiment config as Determined's clients take it: they build a storage manager with the
    checkpoint_storage section as keyword arguments, so pedl's S3 `region` and a directory's `host_path`,
    keys Determined does not know, are left out (boto3 reads the region from AWS_DEFAULT_REGION there)."""
    if not isinstance(config, dict) or not isinstance(config.get("checkpoint_storage"), dict):
        return config
    own = ("region", "host_path") if config["checkpoint_storage"].get("type") == "directory" else ("region",)
    storage = {k: v for k, v in config["checkpoint_storage"].items() if k not in own}
    return {**config, "checkpoint_storage": storage}
