"""`pedl trial export-metrics`: a trial's raw metric reports as CSV (GET /api/v1/trials/{id}/metrics/csv),
streamed to stdout or into a file. A file shows the bytes written as they come (a big trial takes a
while) and appears under its name only when complete."""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from typing import BinaryIO

from pedl.cli.checkpoint_download import DownloadProgress
from pedl.cli.client import MasterClient
from pedl.errors import InvalidArgument

CHUNK = 64 * 1024
MAX_GROUP = 64
READ_TIMEOUT = 600.0  # the master reads every report once before the first byte: allow a slow start


def check_arguments(group: str | None, output: Path | None) -> None:
    if group is not None and not 1 <= len(group) <= MAX_GROUP:
        raise InvalidArgument(f"--group: must be 1 to {MAX_GROUP} characters long, not {len(group)}")
    if output is None or str(output) == "-":
        return
    if output.is_dir():
        raise InvalidArgument(f"--output {output}: is a directory; give a file name")
    if not output.parent.is_dir():
        raise InvalidArgument(f"--output {output}: the directory {output.parent} does not exist")


def _copy(
    client: MasterClient, trial_id: int, group: str | None, sink: BinaryIO, progress: DownloadProgress | None
) -> int:
    written = 0
    params = {"group": group} if group is not None else None
    with client.open_stream(f"/api/v1/trials/{trial_id}/metrics/csv", params, read_timeout=READ_TIMEOUT) as resp:
        for chunk in resp.iter_bytes(CHUNK):
            sink.write(chunk)
            written += len(chunk)
            if progress is not None:
                progress.advance(len(chunk))
    sink.flush()
    return written


def export_metrics(client: MasterClient, trial_id: int, *, group: str | None, output: Path | None) -> int:
    """Write the CSV to `output` (stdout when None or "-"); returns the bytes written."""
    check_arguments(group, output)
    if output is None or str(output) == "-":
        return _copy(client, trial_id, group, sys.stdout.buffer, None)
    partial = output.parent / f".{output.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        with open(partial, "wb") as sink, DownloadProgress(f"Exporting trial {trial_id}'s metrics", None) as progress:
            written = _copy(client, trial_id, group, sink, progress)
        os.replace(partial, output)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written
