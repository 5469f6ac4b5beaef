"""Deleting some entries of a checkpoint from its storage (shared_fs or S3), the entries named by its
own listing (CheckpointStorage.resources). On shared_fs it is pedl/common/local_removal.py (never following a
symlink), the module a checkpoint GC task runs on its agent too."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

from pedl.common import local_removal
from pedl.common.checkpoint_storage import CheckpointStorage, S3Storage, SharedFSStorage
from pedl.common.s3_errors import s3_error
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
    """pedl/common/local_removal.py (which a checkpoint GC task runs too), its errors as pedl's."""
    try:
        local_removal.remove_entries(root, entries)
    except ValueError as exc:
        raise Forbidden(str(exc)) from None
    except OSError as exc:
        raise PedlError(exc.strerror or str(exc)) from None


def _remove_s3(storage: S3Storage, uuid: str, entries: Collection[str]) -> None:
    base = storage.key_prefix(uuid)
    keys = sorted(base + e for e in entries)
    for start in range(0, len(keys), storage.DELETE_BATCH):
        batch = keys[start : start + storage.DELETE_BATCH]
        try:
            answer = storage.client.delete_objects(
                Bucket=storage.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True}
            )
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
            raise PedlError(
                f"cannot delete s3://{storage.bucket}/{first.get('Key')}: "
                f"{first.get('Code', '')} {first.get('Message', '')}".rstrip()
                + more
            )
