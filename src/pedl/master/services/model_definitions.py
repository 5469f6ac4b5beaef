"""Model definitions: Determined's v1File list (as det and pedl upload it) to a gzipped tar stored
with the experiment, and back to the `{b64Tgz}` the agent fetches."""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import tarfile
from typing import Any

from pedl.errors import InvalidArgument

MAX_MODEL_DEF_BYTES = 96 * 1024 * 1024
FILE_TYPE_REG = 48  # ord("0")
FILE_TYPE_DIR = 53  # ord("5")


def _bad(index: int, field: str, message: str) -> InvalidArgument:
    path = f"modelDefinition[{index}].{field}"
    return InvalidArgument(f"{path}: {message}", fields=[{"field": path, "message": message}])


def _int(value: Any, index: int, field: str, default: int) -> int:
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _bad(index, field, "must be an integer") from None


def files_to_tgz(files: Any, max_bytes: int | None = None) -> tuple[bytes, int, int]:
    """Return (tgz bytes, raw size, file count); refuse paths that escape the directory.
    `max_bytes` defaults to MAX_MODEL_DEF_BYTES, read at call time."""
    if max_bytes is None:
        max_bytes = MAX_MODEL_DEF_BYTES
    if files is None:
        files = []
    if not isinstance(files, list):
        raise InvalidArgument("modelDefinition: must be a list of files",
                              fields=[{"field": "modelDefinition", "message": "must be a list"}])
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for i, f in enumerate(files):
            if not isinstance(f, dict):
                raise _bad(i, "", "must be an object")
            path = f.get("path")
            if not isinstance(path, str) or not path:
                raise _bad(i, "path", "must be a non-empty string")
            norm = posixpath.normpath(path)
            if norm.startswith("/") or norm == ".." or norm.startswith("../"):
                raise _bad(i, "path", f"{path!r} escapes the model directory")
            ftype = _int(f.get("type"), i, "type", FILE_TYPE_REG)
            info = tarfile.TarInfo(norm)
            info.mtime = _int(f.get("mtime"), i, "mtime", 0)
            mode = _int(f.get("mode"), i, "mode", 0o644)
            if ftype == FILE_TYPE_DIR:
                info.type = tarfile.DIRTYPE
                info.mode = (mode & 0o7777) or 0o755
                tar.addfile(info)
                continue
            if ftype != FILE_TYPE_REG:
                raise _bad(i, "type", f"unsupported file type {ftype} (48 = file, 53 = directory)")
            content = f.get("content") or ""
            if not isinstance(content, str):
                raise _bad(i, "content", "must be base64 text")
            try:
                data = base64.b64decode(content, validate=True)
            except (binascii.Error, ValueError):
                raise _bad(i, "content", "is not valid base64") from None
            total += len(data)
            if total > max_bytes:
                raise InvalidArgument(
                    f"modelDefinition: the model directory exceeds {max_bytes // (1024 * 1024)} MiB",
                    fields=[{"field": "modelDefinition", "message": "too large"}])
            info.size = len(data)
            info.mode = (mode & 0o7777) or 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), total, len(files)


def tgz_to_files(tgz: bytes) -> list[dict[str, Any]]:
    """The inverse, for GET .../model_def_tree style answers (paths and sizes only)."""
    out = []
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        for m in tar.getmembers():
            out.append({"path": m.name, "isDir": m.isdir(), "size": m.size})
    return out


def b64_tgz(tgz: bytes) -> str:
    return base64.b64encode(tgz).decode()
