"""Directories every user may enter, for tests whose tasks run as other users (each user's own uid on a
root agent): pytest's tmp_path lies under /tmp/pytest-of-<user>, which pytest keeps 0700, as an agent's
checkpoint storage or a bind mount's host path never is. Each test process has a base of its own
(`remove_session_base` at the end of its session)."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

BASE = Path(tempfile.gettempdir()) / f"pedl-tests-enterable-{os.getuid()}"


def session_base() -> Path:
    """This process's base (0711: others may enter it, not list it), under a shared one of the same mode."""
    base = BASE / str(os.getpid())
    for directory in (BASE, base):
        directory.mkdir(mode=0o711, exist_ok=True)
        os.chmod(directory, 0o711)
    return base


def remove_session_base() -> None:
    shutil.rmtree(BASE / str(os.getpid()), ignore_errors=True)


def make_enterable_dir(name: str) -> Path:
    """A fresh directory (0711) of its own."""
    path = Path(tempfile.mkdtemp(prefix=f"{name[:40]}-", dir=session_base()))
    os.chmod(path, 0o711)
    return path


def enterable_twin(path: Path) -> Path:
    """A directory (0711) standing for `path`: the same one for the same path, so a cluster started again
    on one work directory finds its checkpoints."""
    twin = session_base() / f"{path.name[:40]}-{hashlib.sha256(str(path).encode()).hexdigest()[:12]}"
    twin.mkdir(mode=0o711, exist_ok=True)
    os.chmod(twin, 0o711)
    return twin


@pytest.fixture
def enterable_tmp(request: pytest.FixtureRequest) -> Iterator[Path]:
    """A directory of the test's own that every user may enter; removed after it."""
    path = make_enterable_dir(request.node.name)
    yield path
    shutil.rmtree(path, ignore_errors=True)
