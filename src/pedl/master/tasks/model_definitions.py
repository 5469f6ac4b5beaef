"""Model definitions: Determined's v1File list (as det and pedl upload it) to a gzipped tar stored
with the experiment, and back to the `{b64Tgz}` the agent fetches. How many uploads are read at once
(`upload_slot`) and how many bytes of model definitions one user's experiments may hold (`check_stored`)
are bounded."""

from __future__ import annotations

import base64
import binascii
import io
import posixpath
import tarfile
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from pedl.errors import InvalidArgument, PayloadTooLarge
from pedl.master.db import models
from pedl.master.identity.user_slots import Bound, Slot

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

MAX_MODEL_DEF_BYTES = 96 * 1024 * 1024
FILE_TYPE_REG = 48  # ord("0")
FILE_TYPE_DIR = 53  # ord("5")
MAX_MTIME = 8**11 - 1  # what a ustar header's 11 octal digits hold (year 2242); tarfile needs GNU format beyond
MAX_MODE = 0o177777  # st_mode: file type and permission bits
MAX_PATH_LENGTH = 4096


def _bad(index: int, field: str, message: str) -> InvalidArgument:
    path = f"modelDefinition[{index}].{field}"
    return InvalidArgument(f"{path}: {message}", fields=[{"field": path, "message": message}])


def _int(value: Any, index: int, field: str, default: int, maximum: int) -> int:
    """det sends integers as numbers or as decimal strings (mtime); anything else is refused here
    rather than failing later on the agent (an mtime of 1e30 overflows tarfile's header)."""
    if value is None:
        return default
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _bad(index, field, "must be an integer")
    try:
        number = int(value)
    except ValueError:  # also a string of more digits than int() converts
        raise _bad(index, field, "must be an integer") from None
    if not 0 <= number <= maximum:
        raise _bad(index, field, f"must be between 0 and {maximum}")
    return number


def _size(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def _path_problem(path: str) -> str | None:
    if len(path) > MAX_PATH_LENGTH:
        return f"is longer than {MAX_PATH_LENGTH} characters"
    # a NUL ends the name in the tar header ("a\x00b" would unpack as "a"); a backslash is a
    # separator on some clients and a character on the agent
    if any(c == "\\" or ord(c) < 32 or ord(c) == 127 for c in path):
        return f"{path!r} contains a control character or a backslash"
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return f"{path!r} is not valid Unicode text"
    return None


def files_to_tgz(files: Any, max_bytes: int | None = None) -> tuple[bytes, int, int]:
    """Return (tgz bytes, raw size, file count); refuse paths that escape the directory.
    `max_bytes` defaults to MAX_MODEL_DEF_BYTES, read at call time."""
    if max_bytes is None:
        max_bytes = MAX_MODEL_DEF_BYTES
    if files is None:
        files = []
    if not isinstance(files, list):
        raise InvalidArgument(
            "modelDefinition: must be a list of files",
            fields=[{"field": "modelDefinition", "message": "must be a list"}],
        )
    buf = io.BytesIO()
    total = 0
    with tarfile.open(fileobj=buf, mode="w:gz", compresslevel=6) as tar:
        for i, f in enumerate(files):
            if not isinstance(f, dict):
                raise _bad(i, "", "must be an object")
            path = f.get("path")
            if not isinstance(path, str) or not path:
                raise _bad(i, "path", "must be a non-empty string")
            problem = _path_problem(path)
            if problem:
                raise _bad(i, "path", problem)
            norm = posixpath.normpath(path)
            if norm.startswith("/") or norm == ".." or norm.startswith("../"):
                raise _bad(i, "path", f"{path!r} escapes the model directory")
            ftype = _int(f.get("type"), i, "type", FILE_TYPE_REG, 255)
            info = tarfile.TarInfo(norm)
            info.mtime = _int(f.get("mtime"), i, "mtime", 0, MAX_MTIME)
            mode = _int(f.get("mode"), i, "mode", 0o644, MAX_MODE)
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
                    f"modelDefinition: the model directory exceeds {_size(max_bytes)} "
                    f"(limits.max_model_definition_bytes)",
                    fields=[{"field": "modelDefinition", "message": "too large"}],
                )
            info.size = len(data)
            info.mode = (mode & 0o7777) or 0o644
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue(), total, len(files)


def b64_tgz(tgz: bytes) -> str:
    return base64.b64encode(tgz).decode()


def upload_slot(ctx: MasterContext, user_id: int) -> Slot:
    """A slot among the model uploads being read, taken before the body is: past
    limits.max_concurrent_uploads_per_user of the user's, or limits.max_concurrent_uploads in all, a 429."""
    limits = ctx.config.limits
    return ctx.uploads.take(
        user_id,
        Bound(limits.max_concurrent_uploads_per_user, "limits.max_concurrent_uploads_per_user"),
        Bound(limits.max_concurrent_uploads, "limits.max_concurrent_uploads"),
    )


def stored_bytes(s: Session, user_id: int) -> int:
    """What the master stores of the model definitions of `user_id`'s experiments (compressed). (length() of
    a stored blob reads its header only, on both databases.)"""
    return int(
        s.scalar(
            select(func.coalesce(func.sum(func.length(models.ModelDefinition.archive)), 0))
            .join(models.Experiment, models.Experiment.id == models.ModelDefinition.experiment_id)
            .where(models.Experiment.owner_id == user_id)
        )
        or 0
    )


def check_stored(s: Session, user_id: int, adding: int, limit: int, field: str) -> None:
    """Refuse `adding` more bytes of the user's model definitions when they would pass
    limits.max_model_definition_bytes_per_user (413 naming `field` and the setting); called in the transaction
    that stores them, under the cluster lock, so two uploads cannot both take the last of it."""
    held = stored_bytes(s, user_id)
    if held + adding > limit:
        message = (
            f"storing this model definition ({_size(adding)}) would give your experiments "
            f"{_size(held + adding)} of model definitions on the master, more than the limit of "
            f"{_size(limit)} (limits.max_model_definition_bytes_per_user); delete experiments you no longer "
            "need (det experiment delete)"
        )
        raise PayloadTooLarge(f"{field}: {message}", fields=[{"field": field, "message": message}])
