"""`pedl checkpoint download`: a checkpoint's files into a local directory, with progress.

shared_fs files this machine can see are copied directly; anything else (s3, a remote master) is
the tar the master streams from GET /api/v1/checkpoints/{uuid}/download. Files land in a staging
directory that is renamed into place only when complete."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import time
import uuid as uuid_lib
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any

from pedl.cli.client import MasterClient
from pedl.cli.output import err, fmt_bytes, info
from pedl.common.checkpoint_files import list_directory
from pedl.common.checkpoint_storage import SharedFSStorage
from pedl.errors import InvalidArgument, PedlError

CHUNK = 1024 * 1024
PLAIN_PROGRESS_EVERY = 5.0  # seconds between progress lines when stderr is not a terminal


class DownloadProgress:
    """A Rich bar on a terminal; elsewhere (CI logs, pipes) a line every PLAIN_PROGRESS_EVERY
    seconds, so a long download still shows that it moves."""

    def __init__(self, description: str, total: int | None, clock: Callable[[], float] = time.monotonic) -> None:
        self.description, self.total, self.done = description, total, 0
        self._clock = clock
        self._console = err()
        self._bar: Any = None
        self._task: Any = None
        self._last = clock()

    def __enter__(self) -> DownloadProgress:
        if self._console.is_terminal:
            from rich.progress import (
                BarColumn,
                DownloadColumn,
                Progress,
                TextColumn,
                TimeRemainingColumn,
                TransferSpeedColumn,
            )

            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                DownloadColumn(),
                TransferSpeedColumn(),
                TimeRemainingColumn(),
                console=self._console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.description, total=self.total)
        return self

    def advance(self, n: int) -> None:
        self.done += n
        if self._bar is not None:
            self._bar.advance(self._task, n)
        elif self._clock() - self._last >= PLAIN_PROGRESS_EVERY:
            self._last = self._clock()
            of = f" of {fmt_bytes(self.total)}" if self.total else ""
            info(f"{self.description}: {fmt_bytes(self.done)}{of}")

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def file_bytes(resources: dict[str, Any]) -> int:
    return sum(int(v) for k, v in resources.items() if not k.endswith("/") and str(v).isdigit())


def visible_shared_fs_dir(checkpoint: dict[str, Any]) -> Path | None:
    """The checkpoint's shared_fs directory if this machine sees it with exactly the files the
    master lists (same names and sizes), else None."""
    storage = checkpoint.get("storage") or {}
    if (storage.get("type") or "shared_fs") != "shared_fs" or not storage.get("host_path"):
        return None
    try:
        path = SharedFSStorage(storage["host_path"], storage.get("storage_path")).path_of(checkpoint["uuid"])
        if not path.is_dir():
            return None
        listed = {k: str(v) for k, v in list_directory(path).items()}
    except (OSError, ValueError, PedlError):
        return None
    expected = {k: str(v) for k, v in (checkpoint.get("resources") or {}).items()}
    return path if listed == expected else None


def prepare_output(dest: Path) -> None:
    if dest.exists() and not dest.is_dir():
        raise InvalidArgument(f"--output {dest}: exists and is not a directory")
    if dest.is_dir() and any(dest.iterdir()):
        raise InvalidArgument(f"--output {dest}: the directory is not empty; choose another or empty it")


def download_checkpoint(
    client: MasterClient, checkpoint: dict[str, Any], dest: Path, *, via_master: bool = False
) -> str:
    """Write the checkpoint's files under `dest`; returns how they came ("copied from PATH" or
    "streamed from the master")."""
    uuid = checkpoint["uuid"]
    if checkpoint.get("state") == "STATE_DELETED":
        raise InvalidArgument(f"checkpoint {uuid} was deleted by garbage collection; its files are gone")
    prepare_output(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.partial-{uuid_lib.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        source = None if via_master else visible_shared_fs_dir(checkpoint)
        if source is not None:
            _copy(source, staging, checkpoint.get("resources") or {}, uuid)
            how = f"copied from {source}"
        else:
            _stream(client, uuid, staging)
            how = "streamed from the master"
        if dest.is_dir():
            dest.rmdir()  # empty, checked above
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return how


def _copy(source: Path, staging: Path, resources: dict[str, Any], uuid: str) -> None:
    with DownloadProgress(f"Copying checkpoint {uuid[:8]}", file_bytes(resources)) as progress:
        for rel in sorted(resources):
            target = staging / rel.rstrip("/")
            if rel.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(source / rel, "rb") as src, open(target, "wb") as out:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    progress.advance(len(chunk))


class _ResponseReader(io.RawIOBase):
    """The file object tarfile's stream mode reads: the response body, counted as it goes (a raw stream that
    only reads; tarfile never seeks or writes it)."""

    def __init__(self, chunks: Iterator[bytes], on_bytes: Callable[[int], None]) -> None:
        super().__init__()
        self._chunks, self._on_bytes = chunks, on_bytes
        self._buffer = bytearray()

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buffer) < size:
            chunk = next(self._chunks, b"")
            if not chunk:
                break
            self._on_bytes(len(chunk))
            self._buffer += chunk
        n = len(self._buffer) if size < 0 else min(size, len(self._buffer))
        out = bytes(self._buffer[:n])
        del self._buffer[:n]
        return out


def _stream(client: MasterClient, uuid: str, staging: Path) -> None:
    with client.open_stream(f"/api/v1/checkpoints/{uuid}/download") as resp:
        length = resp.headers.get("content-length")
        with DownloadProgress(f"Downloading checkpoint {uuid[:8]}", int(length) if length else None) as progress:
            reader = _ResponseReader(resp.iter_bytes(CHUNK), progress.advance)
            try:
                with tarfile.open(fileobj=reader, mode="r|") as tar:
                    for member in tar:
                        _check_member(member)
                        if hasattr(tarfile, "data_filter"):
                            tar.extract(member, staging, filter="data")
                        else:  # Python before 3.11.4: _check_member is the guard
                            tar.extract(member, staging)
            except tarfile.ReadError as exc:
                raise PedlError(f"the download of checkpoint {uuid} broke off ({exc}); try again") from None
            reader.read()  # tarfile stops at the first end-of-archive block; count the rest
            if length and progress.done != int(length):
                raise PedlError(
                    f"the download of checkpoint {uuid} broke off after {fmt_bytes(progress.done)} "
                    f"of {fmt_bytes(int(length))}; try again"
                )


def _check_member(member: tarfile.TarInfo) -> None:
    path = PurePosixPath(member.name)
    if path.is_absolute() or ".." in path.parts or not (member.isfile() or member.isdir()):
        raise PedlError(
            f"refusing the entry {member.name!r} of the checkpoint's tar (only plain files and "
            "directories inside the checkpoint are allowed)"
        )
