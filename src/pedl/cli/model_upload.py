"""Packs a model directory into Determined's v1File list for `POST /api/v1/experiments`.
Honours `.detignore` then `.pedlignore`, always skips `__pycache__`/`.git`, and enforces a size limit."""

from __future__ import annotations

import base64
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pedl.cli.ignore_rules import IgnoreRules
from pedl.cli.output import fmt_bytes
from pedl.errors import InvalidArgument

REGTYPE, DIRTYPE = 48, 53  # ord("0"), ord("5"): tar's regular file and directory
IGNORE_FILES = (".detignore", ".pedlignore")  # later files win, so .pedlignore can override
ALWAYS_IGNORED = ["__pycache__/", ".git/", "*.py[co]"]
MAX_BYTES_ENV = "PEDL_MAX_MODEL_DEF_BYTES"
DEFAULT_MAX_BYTES = 96 * 1024 * 1024


def max_model_bytes() -> int:
    raw = os.environ.get(MAX_BYTES_ENV)
    if not raw:
        return DEFAULT_MAX_BYTES
    try:
        return int(raw)
    except ValueError:
        raise InvalidArgument(f"{MAX_BYTES_ENV} must be an integer number of bytes, got {raw!r}") from None


@dataclass
class Entry:
    rel: str  # POSIX path relative to the model directory
    path: Path
    is_dir: bool
    size: int
    st: os.stat_result


def load_ignore_rules(root: Path) -> IgnoreRules:
    rules = IgnoreRules(ALWAYS_IGNORED)
    for name in IGNORE_FILES:
        path = root / name
        if path.is_file():
            rules.extend(path.read_text(errors="replace").splitlines())
    # Re-add the fixed rules last so that no `!` pattern brings __pycache__ or .git back.
    rules.extend(ALWAYS_IGNORED[:2])
    return rules


def scan_model_dir(model_dir: str | Path) -> list[Entry]:
    """The entries to upload, directories before their contents, in sorted order."""
    root = Path(model_dir)
    if not root.exists():
        raise InvalidArgument(f"model directory {str(model_dir)!r} does not exist")
    if not root.is_dir():
        raise InvalidArgument(f"model directory {str(model_dir)!r} is not a directory")
    rules = load_ignore_rules(root)
    entries: list[Entry] = []

    def walk(directory: Path, prefix: str) -> None:
        try:
            children = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            raise InvalidArgument(f"cannot read {directory}: {exc.strerror}") from None
        for child in children:
            rel = f"{prefix}{child.name}"
            if child.name in IGNORE_FILES and child.is_file():
                continue  # like det, ignore files are never uploaded, at any depth
            try:
                st = os.stat(child.path)  # follows symlinks: a link uploads its target's content
            except OSError:
                continue  # dangling link
            is_dir = stat.S_ISDIR(st.st_mode)
            if rules.ignored(rel, is_dir):
                continue
            if is_dir:
                if child.is_symlink():
                    continue  # never follow directory links: they can loop
                entries.append(Entry(rel, Path(child.path), True, 0, st))
                walk(Path(child.path), rel + "/")
            elif stat.S_ISREG(st.st_mode):
                entries.append(Entry(rel, Path(child.path), False, st.st_size, st))

    walk(root, "")
    return entries


def check_size(entries: list[Entry], model_dir: str | Path, limit: int | None = None) -> int:
    limit = max_model_bytes() if limit is None else limit
    total = sum(e.size for e in entries)
    if total > limit:
        raise InvalidArgument(
            f"model directory {str(model_dir)!r} is {fmt_bytes(total)} ({total} bytes), over the "
            f"limit of {fmt_bytes(limit)} ({limit} bytes); list large files in .pedlignore"
        )
    return total


def v1_file(entry: Entry) -> dict[str, Any]:
    content = ""
    if not entry.is_dir:
        try:
            content = base64.b64encode(entry.path.read_bytes()).decode("ascii")
        except OSError as exc:
            raise InvalidArgument(f"cannot read {entry.path}: {exc.strerror}") from None
    return {
        "path": entry.rel,
        "type": DIRTYPE if entry.is_dir else REGTYPE,
        "content": content,
        "mtime": str(int(entry.st.st_mtime)),
        "mode": entry.st.st_mode,
        "uid": 0,  # like det: ownership on the agent is the agent's business
        "gid": 0,
    }


def pack_model_dir(
    model_dir: str | Path, *, limit: int | None = None, progress: Callable[[int], None] | None = None
) -> list[dict[str, Any]]:
    """Scan, check the size (before reading any content), then encode every entry."""
    entries = scan_model_dir(model_dir)
    check_size(entries, model_dir, limit)
    files = []
    for entry in entries:
        files.append(v1_file(entry))
        if progress is not None:
            progress(entry.size)
    return files
