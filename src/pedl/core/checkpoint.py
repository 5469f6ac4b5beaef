"""core.checkpoint: checkpoints as context-managed local directories.

Files go to the experiment's checkpoint storage; the master learns of each completed checkpoint
(uuid, files and sizes, metadata) when the `store_path` block exits. Off-cluster, checkpoints go to
a local directory and are announced on stdout.
"""

from __future__ import annotations

import abc
import contextlib
import json
import shutil
import uuid as uuid_lib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pedl.common.checkpoint_storage import CheckpointStorage, SharedFSStorage
from pedl.core.cluster_info import ClusterInfo
from pedl.core.distributed import DistributedContext
from pedl.core.master_session import MasterSession
from pedl.core.train import check_steps
from pedl.core.wire_format import rfc3339_now, to_json_value

METADATA_FILE = "metadata.json"


class CheckpointContext(abc.ABC):
    """Stores and restores checkpoints; `MasterCheckpointContext` or `LocalCheckpointContext`.

    `storage` is None when the task has no checkpoint storage configured; then every call raises
    an error saying so (`missing_storage_reason`).

    With several workers, only the chief (rank 0) stores checkpoints: `store_path` and `upload`
    raise on the other ranks, as Determined's do with `shard=False`. The usual pattern is that
    the chief stores and broadcasts the storage_id, which the others wait for:

        storage_id = None
        if core.distributed.is_chief:
            with core.checkpoint.store_path({"steps_completed": steps}) as (path, storage_id):
                save(path)
        storage_id = core.distributed.broadcast(storage_id)

    Every rank may restore (`restore_path`, `download`, `get_metadata`): the storage is shared.
    """

    def __init__(
        self,
        storage: CheckpointStorage | None,
        distributed: DistributedContext,
        *,
        missing_storage_reason: str = "no checkpoint storage is configured",
    ) -> None:
        self._storage = storage
        self._distributed = distributed
        self._missing_reason = missing_storage_reason

    @property
    def storage(self) -> CheckpointStorage:
        if self._storage is None:
            raise RuntimeError(self._missing_reason)
        return self._storage

    @contextlib.contextmanager
    def store_path(self, metadata: Mapping[str, Any]) -> Iterator[tuple[Path, str]]:
        """Yield `(path, storage_id)`: write the checkpoint's files under `path`.

        `metadata` must hold `steps_completed`, the number of batches the checkpoint has trained;
        it is saved as metadata.json in the checkpoint and sent to the master. If the block raises,
        nothing is kept and nothing is reported. Only regular files and directories are part of a
        checkpoint: symlinks written under `path` are not reported, uploaded or downloaded.
        """
        metadata = _checked_metadata(metadata)
        self._require_chief("store_path")
        storage = self.storage
        storage_id = str(uuid_lib.uuid4())
        with storage.store_path(storage_id) as path:
            yield path, storage_id
            (path / METADATA_FILE).write_text(json.dumps(metadata, indent=2, allow_nan=False))
        self._report(storage_id, storage.resources(storage_id), metadata)

    @contextlib.contextmanager
    def restore_path(self, storage_id: str) -> Iterator[Path]:
        """Yield a local directory holding checkpoint `storage_id`'s files; do not modify it."""
        with self.storage.restore_path(storage_id) as path:
            yield path

    def upload(self, ckpt_dir: str | Path, metadata: Mapping[str, Any]) -> str:
        """Store a checkpoint from an existing directory; returns its storage_id."""
        src = Path(ckpt_dir)
        if not src.is_dir():
            raise FileNotFoundError(f"{src} is not a directory")
        with self.store_path(metadata) as (path, storage_id):
            # a dangling link has nothing to copy; it must not fail the checkpoint
            shutil.copytree(src, path, dirs_exist_ok=True, ignore_dangling_symlinks=True)
        return storage_id

    def download(self, storage_id: str, ckpt_dir: str | Path) -> None:
        """Copy checkpoint `storage_id` into `ckpt_dir` (created if missing)."""
        with self.restore_path(storage_id) as path:
            shutil.copytree(path, Path(ckpt_dir), dirs_exist_ok=True, ignore_dangling_symlinks=True)

    @abc.abstractmethod
    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        """The metadata the checkpoint was stored with (including steps_completed)."""

    @abc.abstractmethod
    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None: ...

    def _require_chief(self, what: str) -> None:
        if not self._distributed.is_chief:
            raise RuntimeError(
                f"checkpoint.{what}() can only be called on the chief (rank 0), not on rank "
                f"{self._distributed.rank}: let the chief store the checkpoint and broadcast its "
                f"storage_id (core.distributed.broadcast) to the other ranks"
            )


class MasterCheckpointContext(CheckpointContext):
    def __init__(
        self,
        storage: CheckpointStorage | None,
        distributed: DistributedContext,
        session: MasterSession,
        info: ClusterInfo,
        **kwargs: Any,
    ) -> None:
        super().__init__(storage, distributed, **kwargs)
        self._session = session
        self._info = info

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        answer = self._session.get(f"/api/v1/checkpoints/{storage_id}") or {}
        return dict((answer.get("checkpoint") or {}).get("metadata") or {})

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        checkpoint: dict[str, Any] = {
            "uuid": storage_id,
            "allocationId": self._info.allocation_id,
            "taskId": self._info.task_id,
            "reportTime": rfc3339_now(),
            "resources": {name: str(size) for name, size in resources.items()},
            "metadata": metadata,
            "state": "STATE_COMPLETED",
            "training": {"trialId": self._info.trial.trial_id} if self._info.trial else {},
        }
        self._session.post("/api/v1/checkpoints", {"checkpoint": checkpoint})


class LocalCheckpointContext(CheckpointContext):
    """Off-cluster twin: metadata lives in each checkpoint's metadata.json."""

    def get_metadata(self, storage_id: str) -> dict[str, Any]:
        with self.restore_path(storage_id) as path:
            file = path / METADATA_FILE
            return json.loads(file.read_text()) if file.exists() else {}

    def _report(self, storage_id: str, resources: dict[str, int], metadata: dict[str, Any]) -> None:
        storage = self.storage
        where = storage.path_of(storage_id) if isinstance(storage, SharedFSStorage) else storage
        print(
            f"[pedl] checkpoint {storage_id} stored at {where} (steps_completed={metadata['steps_completed']})",
            flush=True,
        )


def _checked_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    if not isinstance(metadata, Mapping) or "steps_completed" not in metadata:
        raise ValueError(
            "checkpoint metadata must be a dict that includes 'steps_completed', "
            "e.g. store_path({'steps_completed': steps})"
        )
    out = dict(to_json_value(metadata, where="metadata"))
    out["steps_completed"] = check_steps(metadata["steps_completed"], "metadata['steps_completed']")
    return out
