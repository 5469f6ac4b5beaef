"""The checkpoint tar stream: exact length known up front, directories before their files, files read
one at a time from storage, and a file that changed under it ends the stream with an error."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from pedl.common.checkpoint_storage import SharedFSStorage
from pedl.errors import PedlError
from pedl.master.services.checkpoint_download import plan_tar, tar_stream


@pytest.fixture
def storage(tmp_path: Path) -> SharedFSStorage:
    storage = SharedFSStorage(tmp_path)
    with storage.store_path("ck") as path:
        (path / "empty.txt").write_bytes(b"")
        (path / "odd.bin").write_bytes(b"o" * 513)
        (path / "exact.bin").write_bytes(b"e" * 1024)
        (path / "d" / "e").mkdir(parents=True)
        (path / "d" / "e" / "f.txt").write_text("deep")
        (path / ("a very long name " * 10)).write_text("pax")  # longer than ustar's 100 characters
    return storage


def test_the_stream_is_a_tar_of_exactly_the_planned_length(storage: SharedFSStorage) -> None:
    plan = plan_tar(storage.resources("ck"), mtime=1_700_000_000.5)
    data = b"".join(tar_stream(storage, "ck", plan))
    assert len(data) == plan.length
    assert plan.file_bytes == 513 + 1024 + 4 + 3
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        members = tar.getmembers()
        names = [m.name for m in members]
        assert names.index("d") < names.index("d/e") < names.index("d/e/f.txt")
        assert {m.name: m.size for m in members if m.isfile()} == {
            "empty.txt": 0, "odd.bin": 513, "exact.bin": 1024, "d/e/f.txt": 4, ("a very long name " * 10): 3}
        assert all(m.mtime == 1_700_000_000 for m in members)
        assert tar.extractfile("odd.bin").read() == b"o" * 513


def test_a_file_that_grew_ends_the_stream_with_an_error(storage: SharedFSStorage) -> None:
    plan = plan_tar(storage.resources("ck"), mtime=0)
    (storage.path_of("ck") / "odd.bin").write_bytes(b"o" * 600)
    with pytest.raises(PedlError, match="odd.bin changed while it was read"):
        b"".join(tar_stream(storage, "ck", plan))


def test_a_file_that_shrank_ends_the_stream_with_an_error(storage: SharedFSStorage) -> None:
    plan = plan_tar(storage.resources("ck"), mtime=0)
    (storage.path_of("ck") / "exact.bin").write_bytes(b"e")
    with pytest.raises(PedlError, match=r"exact.bin changed while it was read \(1 bytes, expected 1024\)"):
        b"".join(tar_stream(storage, "ck", plan))


def test_an_empty_checkpoint_is_an_empty_tar() -> None:
    plan = plan_tar({}, mtime=0)
    assert plan.length == 1024
    with tarfile.open(fileobj=io.BytesIO(b"".join(tar_stream(SharedFSStorage("/nonexistent"), "x", plan)))) as tar:
        assert tar.getmembers() == []
