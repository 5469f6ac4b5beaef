"""The master's own wheel: complete, reproducible, its RECORD right, and installable as the running
version (agents on stock images install the master's pedl from the master)."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import pedl
from pedl.common.package import build_wheel, own_wheel, wheel_filename
from pedl.version import __version__


def members(data: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(BytesIO(data)) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_wheel_holds_the_package_its_data_and_metadata() -> None:
    wheel = own_wheel()
    assert wheel.filename == wheel_filename() == f"pedl-{__version__}-py3-none-any.whl"
    files = members(wheel.data)
    package_dir = Path(pedl.__file__).resolve().parent
    assert files["pedl/__init__.py"] == (package_dir / "__init__.py").read_bytes()
    assert "pedl/master/db/migrations/script.py.mako" in files  # package data, not only modules
    assert any(n.startswith("pedl/master/db/migrations/versions/0001") for n in files)
    assert not [n for n in files if "__pycache__" in n or n.endswith(".pyc")]
    dist = f"pedl-{__version__}.dist-info"
    metadata = files[f"{dist}/METADATA"].decode()
    assert f"Version: {__version__}" in metadata and "Requires-Dist: fastapi" in metadata.replace(">", " ")
    assert b"pedl = pedl.cli.main:main" in files[f"{dist}/entry_points.txt"]
    assert wheel.sha256 == hashlib.sha256(wheel.data).hexdigest()


def test_the_record_lists_every_member_with_its_hash() -> None:
    files = members(own_wheel().data)
    dist = f"pedl-{__version__}.dist-info"
    record = dict(line.split(",", 1) for line in files[f"{dist}/RECORD"].decode().splitlines())
    assert set(record) == set(files)
    for name, data in files.items():
        if name.endswith("/RECORD"):
            continue
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert record[name] == f"sha256={digest},{len(data)}", name


def test_the_same_sources_give_the_same_bytes(tmp_path: Path) -> None:
    package = tmp_path / "pedl"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("x = 1\n")
    (package / "sub" / "mod.py").write_text("y = 2\n")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "junk.pyc").write_bytes(b"\0")
    (package / "link.py").symlink_to(package / "__init__.py")
    first, second = build_wheel(package, "9.9.9"), build_wheel(package, "9.9.9")
    assert first.data == second.data and first.filename == "pedl-9.9.9-py3-none-any.whl"
    assert {n for n in members(first.data) if not n.startswith("pedl-9.9.9.dist-info")} == {
        "pedl/__init__.py",
        "pedl/sub/mod.py",
    }  # no bytecode, no symlink


def test_pip_installs_it_as_the_running_version(tmp_path: Path) -> None:
    wheel = own_wheel()
    path = tmp_path / wheel.filename
    path.write_bytes(wheel.data)
    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            "--target",
            str(target),
            str(path),
        ],
        check=True,
        timeout=120,
    )
    out = subprocess.run(
        [sys.executable, "-c", "import pedl, pedl.version; print(pedl.__file__); print(pedl.version.__version__)"],
        env={"PYTHONPATH": str(target)},
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.split()
    assert out == [str(target / "pedl" / "__init__.py"), __version__]
    assert (target / "bin" / "pedl").exists()  # the console script
