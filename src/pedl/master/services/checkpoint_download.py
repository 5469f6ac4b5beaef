"""A checkpoint as a tar stream, read file by file from its storage, for `pedl checkpoint download`
(GET /api/v1/checkpoints/{uuid}/download). Nothing is staged on the master's disk."""

from __future__ import annotations

import tarfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from pedl.common.checkpoint_storage import CheckpointStorage
from pedl.errors import PedlError

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
