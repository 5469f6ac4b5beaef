"""Where checkpoints may live: the master's storage roots (its own checkpoint storage plus
`security.checkpoint_storage_roots`), and the checks that keep every checkpoint path inside one.

An experiment's storage is checked against the roots when it is created (`check_experiment_storage`),
and every checkpoint is checked again, on resolved paths, before garbage collection deletes it or
download reads it (`checkpoint_problem`): the roots may have changed, and older rows
took their storage from the request. Checks compare `os.path.realpath`s, so a symlink cannot carry a
path out of a root.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pedl.config.checkpoint_storage import StorageRoot, master_view, parse_storage_root, storage_root_of
from pedl.errors import InvalidArgument

if TYPE_CHECKING:
    from pedl.config.master_config import MasterConfig


@dataclass(frozen=True)
class StorageRoots:
    """Resolved directories (shared_fs) and bucket prefixes (s3) where checkpoints may live."""

    dirs: tuple[str, ...] = ()
    s3: tuple[StorageRoot, ...] = ()
    endpoints: tuple[str | None, ...] = (None,)  # S3 endpoints; None is AWS's own

    @classmethod
    def of(
        cls, master_storage: Mapping[str, Any], extra: Iterable[str] = (), endpoints: Iterable[str] = ()
    ) -> StorageRoots:
        roots = [storage_root_of(dict(master_storage)), *(parse_storage_root(text) for text in extra)]
        return cls(
            dirs=tuple(dict.fromkeys(os.path.realpath(r.path) for r in roots if r.type == "shared_fs")),
            s3=tuple(dict.fromkeys(r for r in roots if r.type == "s3")),
            endpoints=tuple(dict.fromkeys([None, master_storage.get("endpoint_url"), *endpoints])),
        )

    def __str__(self) -> str:
        return ", ".join([*self.dirs, *(str(r) for r in self.s3)]) or "none"


def allowed_roots(config: MasterConfig) -> StorageRoots:
    return StorageRoots.of(
        config.effective_checkpoint_storage().model_dump(mode="json"),
        config.security.checkpoint_storage_roots,
        config.security.s3_endpoint_urls,
    )


# -- pure comparisons -----------------------------------------------------------------------------


def dir_inside(path: str, root: str) -> bool:
    """Whether the absolute, resolved `path` is `root` or below it."""
    return path == root or path.startswith(root if root.endswith("/") else root + "/")


def prefix_inside(prefix: str, root_prefix: str) -> bool:
    """Whether S3 keys under `prefix` are under `root_prefix` (whole segments: "a/bc" is not in "a/b")."""
    parts, root_parts = [p for p in prefix.split("/") if p], [p for p in root_prefix.split("/") if p]
    return parts[: len(root_parts)] == root_parts


def is_path_component(name: str) -> bool:
    """Whether `name` is one directory entry: not empty, not "." or "..", no separator or NUL."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\x00")


# -- the checks -----------------------------------------------------------------------------------


def storage_problem(storage: Mapping[str, Any], roots: StorageRoots) -> tuple[str, str] | None:
    """(field, why) when a checkpoint_storage section is outside every root; None when inside (a directory
    section by where the master reaches it, its host_path)."""
    if storage.get("type") == "directory":
        problem = storage_problem(master_view(dict(storage)), roots)
        return ("checkpoint_storage.container_path", problem[1]) if problem is not None else None
    kind = storage.get("type") or "shared_fs"
    if kind == "shared_fs":
        if not storage.get("host_path"):
            return "checkpoint_storage.host_path", "required for shared_fs storage"
        base = os.path.realpath(storage_root_of(dict(storage)).path)
        if not os.path.isabs(base) or not any(dir_inside(base, root) for root in roots.dirs):
            return (
                "checkpoint_storage.host_path",
                f"{base} is outside the master's checkpoint storage roots ({roots})",
            )
        return None
    if kind == "s3":
        where = storage_root_of(dict(storage))
        buckets = [r for r in roots.s3 if r.bucket == where.bucket]
        if not buckets:
            return (
                "checkpoint_storage.bucket",
                f"bucket {where.bucket!r} is outside the master's checkpoint storage roots ({roots})",
            )
        if not any(prefix_inside(where.prefix, r.prefix) for r in buckets):
            return ("checkpoint_storage.prefix", f"{where} is outside the master's checkpoint storage roots ({roots})")
        if storage.get("endpoint_url") not in roots.endpoints:
            return (
                "checkpoint_storage.endpoint_url",
                f"{storage.get('endpoint_url')} is not an S3 endpoint this master may use (security.s3_endpoint_urls)",
            )
        return None
    return "checkpoint_storage.type", f"{kind!r} is not a supported storage type"


def check_experiment_storage(storage: Mapping[str, Any], roots: StorageRoots) -> None:
    """Raise InvalidArgument naming the field when an experiment's storage is outside every root."""
    problem = storage_problem(storage, roots)
    if problem is not None:
        field, why = problem
        raise InvalidArgument(
            f"{field}: {why}; an operator may allow more under security.checkpoint_storage_roots in master.yaml",
            fields=[{"field": field, "message": why}],
        )


def confine_experiment_storage(config: MasterConfig, storage: Mapping[str, Any]) -> None:
    """The check at experiment create, against this master's roots."""
    check_experiment_storage(storage, allowed_roots(config))


def location_problem(
    storage: Mapping[str, Any], uuid: str, roots: StorageRoots, *, recorded: Mapping[str, Any] | None = None
) -> str | None:
    """Why checkpoint `uuid` of an experiment stored in `storage` lies outside the roots, judged from
    the configs alone (what the start-up report checks for every row); None when it does not.
    `recorded` is the row's own storage column: older rows took it from the
    request, so it must be inside the roots too."""
    problem = storage_problem(storage, roots)
    if problem is not None:
        return f"{problem[0]}: {problem[1]}"
    if recorded and storage_problem(recorded, roots) is not None:
        return (
            f"its recorded storage {storage_root_of(dict(recorded))} is outside the master's checkpoint "
            f"storage roots ({roots})"
        )
    if not is_path_component(uuid):
        return f"its uuid {uuid!r} is not a single path component"
    return None


def checkpoint_problem(
    storage: Mapping[str, Any], uuid: str, roots: StorageRoots, *, recorded: Mapping[str, Any] | None = None
) -> str | None:
    """Why the master must not touch (delete, read) checkpoint `uuid` now; None when it may. Besides
    `location_problem`: a shared_fs checkpoint's directory must not be a symlink, and its resolved
    path must lie strictly inside a root."""
    why = location_problem(storage, uuid, roots, recorded=recorded)
    if why is not None or (storage.get("type") or "shared_fs") != "shared_fs":
        return why
    path = os.path.join(os.path.realpath(storage_root_of(dict(storage)).path), uuid)
    if os.path.islink(path):
        return f"{path} is a symbolic link"
    real = os.path.realpath(path)
    if not any(dir_inside(real, root) and real != root for root in roots.dirs):
        return f"{real} is outside the master's checkpoint storage roots ({roots})"
    return None
