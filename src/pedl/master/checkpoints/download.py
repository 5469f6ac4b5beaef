"""A checkpoint as a tar stream, read file by file from its storage, for `pedl checkpoint download`
(GET /api/v1/checkpoints/{uuid}/download). Nothing is staged on the master's disk.

What is served: `prepare` checks the checkpoint's location against the master's storage roots first
(storage_roots.checkpoint_problem: a checkpoint outside them, or whose directory is a symlink, is
refused with 403 naming why). The tar holds regular files and directories only. Symlinks are left
out, never followed and never stored as links: a link pointing out of the checkpoint would hand
out a file of the master's host, a dangling one has nothing to send, and `pedl checkpoint
download` accepts nothing but files and directories. Storage listings skip them
(checkpoint_files.list_directory), and files are opened with O_NOFOLLOW on every component, so
a link swapped in after the listing ends the stream instead of being read.
"""

from __future__ import annotations

import logging
import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.errors import Forbidden, NotFound, PedlError
from pedl.master.checkpoints.storage_roots import StorageRoots, checkpoint_problem, is_path_component

log = logging.getLogger(__name__)

BLOCK = 512
CHUNK = 1024 * 1024


@dataclass(frozen=True)
class TarPlan:
    """The tar's entries, fixed before the first byte is sent, so its exact length is known."""

    entries: list[tuple[str, int, bytes]]  # (path as resources names it, size, tar header)

    @property
    def length(self) -> int:
        return sum(len(header) + size + (-size % BLOCK) for _, size, header in self.entries) + 2 * BLOCK

    @property
    def file_bytes(self) -> int:
        return sum(size for _, size, _ in self.entries)


def plan_tar(resources: Mapping[str, int], mtime: float) -> TarPlan:
    """Entries for `resources` ({relative path: size}, directories end in "/"): directories before
    what they hold, every entry with the checkpoint's report time."""
    entries = []
    for rel in sorted(resources, key=lambda r: r.rstrip("/")):
        if not all(is_path_component(part) for part in rel.rstrip("/").split("/")):
            log.warning("left %r out of a checkpoint's tar: not a relative path inside it", rel)
            continue  # an object store may hold keys no directory could
        info = tarfile.TarInfo(rel.rstrip("/"))
        info.mtime = int(mtime)
        if rel.endswith("/"):
            info.type, info.mode, size = tarfile.DIRTYPE, 0o755, 0
        else:
            size = int(resources[rel])
            info.size, info.mode = size, 0o644
        entries.append((rel, size, info.tobuf(format=tarfile.PAX_FORMAT)))
    return TarPlan(entries)


def tar_stream(storage: CheckpointStorage, uuid: str, tar: TarPlan) -> Iterator[bytes]:
    """The bytes of `tar`, reading each file from storage as it goes. A file whose size changed
    since the listing ends the stream with an error (the client sees a short download)."""
    for rel, size, header in tar.entries:
        yield header
        if rel.endswith("/"):
            continue
        sent = 0
        with storage.open_file(uuid, rel) as f:
            while chunk := f.read(min(CHUNK, size - sent + 1)):
                sent += len(chunk)
                if sent > size:
                    break
                yield chunk
        if sent != size:
            raise PedlError(f"checkpoint {uuid}: {rel} changed while it was read ({sent} bytes, expected {size})")
        if size % BLOCK:
            yield b"\0" * (-size % BLOCK)
    yield b"\0" * (2 * BLOCK)


@dataclass(frozen=True)
class Prepared:
    storage: CheckpointStorage
    tar: TarPlan


def prepare(
    uuid: str,
    storage_config: Mapping[str, Any],
    roots: StorageRoots,
    *,
    report_time: float,
    recorded: Mapping[str, Any] | None = None,
) -> Prepared:
    """The storage and tar plan of checkpoint `uuid`, listed before the first byte is sent so that
    storage errors get a proper status. Raises Forbidden when the checkpoint is outside the roots
    and NotFound when it has no files."""
    why = checkpoint_problem(storage_config, uuid, roots, recorded=recorded)
    if why is not None:
        log.warning("refused to download checkpoint %s: %s", uuid, why)
        raise Forbidden(f"checkpoint {uuid} is not served: {why}")
    storage = storage_from_config(storage_config)
    resources = storage.resources(uuid)
    if not resources:
        raise NotFound(f"checkpoint {uuid} has no files in {storage!r}")
    return Prepared(storage, plan_tar(resources, report_time))
