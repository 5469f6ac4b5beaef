"""A wheel of the running pedl, built from its own package directory: what the master serves its
agents (`GET /api/v1/pedl/package`) and what `pedl deploy aws up` uploads for the master it deploys
(the name `pedl` on PyPI is another project's, so pedl ships itself).

Built once per process and kept in memory; the build reads only the package's own directory."""

from __future__ import annotations

import base64
import hashlib
import importlib.metadata
import io
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pedl
from pedl.version import __version__

NAME = "pedl"
TAG = "py3-none-any"
SKIPPED_DIRS = frozenset({"__pycache__"})
SKIPPED_SUFFIXES = (".pyc", ".pyo")
# a fixed time for every member, so the same sources give the same bytes (and the same sha256)
ZIP_TIME = (2020, 1, 1, 0, 0, 0)


@dataclass(frozen=True)
class Wheel:
    filename: str
    data: bytes
    sha256: str


_lock = threading.Lock()
_built: dict[tuple[str, str], Wheel] = {}


def wheel_filename(version: str = __version__) -> str:
    return f"{NAME}-{version}-{TAG}.whl"


def _requires() -> list[str]:
    """The installed distribution's requirements (extras included, with their markers)."""
    try:
        return list(importlib.metadata.requires(NAME) or [])
    except importlib.metadata.PackageNotFoundError:
        return []


def _metadata(version: str) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {NAME}",
        f"Version: {version}",
        "Summary: pedl: a deep-learning training cluster (Determined-compatible)",
        "Requires-Python: >=3.11",
    ]
    lines += [f"Requires-Dist: {req}" for req in _requires()]
    return "\n".join(lines) + "\n"


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(package_dir: Path | None = None, version: str = __version__) -> Wheel:
    """A wheel of the package at `package_dir` (the running pedl by default)."""
    package_dir = package_dir or Path(pedl.__file__).resolve().parent
    members: list[tuple[str, bytes]] = []
    for path in sorted(package_dir.rglob("*")):
        rel = path.relative_to(package_dir)
        if (
            not path.is_file()
            or path.is_symlink()
            or SKIPPED_DIRS.intersection(rel.parts)
            or path.suffix in SKIPPED_SUFFIXES
        ):
            continue
        members.append((f"{NAME}/{rel.as_posix()}", path.read_bytes()))
    dist_info = f"{NAME}-{version}.dist-info"
    members += [
        (f"{dist_info}/METADATA", _metadata(version).encode()),
        (f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: pedl\nRoot-Is-Purelib: true\nTag: {TAG}\n".encode()),
        (f"{dist_info}/entry_points.txt", b"[console_scripts]\npedl = pedl.cli.main:main\n"),
    ]
    record = "\n".join([*(_record_line(n, d) for n, d in members), f"{dist_info}/RECORD,,"]) + "\n"
    members.append((f"{dist_info}/RECORD", record.encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, data in members:
            info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    data = buf.getvalue()
    return Wheel(wheel_filename(version), data, hashlib.sha256(data).hexdigest())


def own_wheel() -> Wheel:
    """The running pedl's own wheel, built on first use (the same bytes for the rest of the process)."""
    key = (str(Path(pedl.__file__).resolve().parent), __version__)
    with _lock:
        if key not in _built:
            _built[key] = build_wheel()
        return _built[key]
