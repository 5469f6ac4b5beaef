"""The checkpoint tar stream: exact length known up front, directories before their files, files read
one at a time from storage, and a file that changed under it ends the stream with an error. Only
regular files inside the checkpoint are sent: symlinks are left out and never followed."""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest

from pedl.common.checkpoint_storage import SharedFSStorage
from pedl.errors import Forbidden, NotFound, PedlError
from pedl.master.checkpoints.download import plan_tar, prepare, tar_stream
from pedl.master.checkpoints.storage_roots import StorageRoots


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
            "empty.txt": 0,
            "odd.bin": 513,
            "exact.bin": 1024,
            "d/e/f.txt": 4,
            ("a very long name " * 10): 3,
        }
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


# -- never outside the checkpoint ---------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    """A file of the master's host that no checkpoint may hand out: exactly as long as odd.bin."""
    path = tmp_path / "secret.txt"
    path.write_bytes(b"S" * 513)
    return path


def test_links_and_special_files_are_left_out(storage: SharedFSStorage, secret: Path, tmp_path: Path) -> None:
    path = storage.path_of("ck")
    (path / "link").symlink_to(secret)
    (path / "dir-link").symlink_to(tmp_path, target_is_directory=True)
    (path / "dangling").symlink_to(tmp_path / "nowhere")
    (path / "d" / "inner-link").symlink_to("../odd.bin")
    os.mkfifo(path / "fifo")
    plan = plan_tar(storage.resources("ck"), mtime=0)
    assert {rel for rel, _, _ in plan.entries} == {
        "empty.txt",
        "odd.bin",
        "exact.bin",
        "d/",
        "d/e/",
        "d/e/f.txt",
        "a very long name " * 10,
    }
    data = b"".join(tar_stream(storage, "ck", plan))
    assert b"SSSS" not in data and len(data) == plan.length


@pytest.mark.parametrize("swap", ["file", "directory"])
def test_a_link_swapped_in_after_the_listing_is_not_followed(
    storage: SharedFSStorage, secret: Path, tmp_path: Path, swap: str
) -> None:
    plan = plan_tar(storage.resources("ck"), mtime=0)
    path = storage.path_of("ck")
    if swap == "file":  # the same size as the file it replaces, so only the link gives it away
        (path / "odd.bin").unlink()
        (path / "odd.bin").symlink_to(secret)
    else:
        (tmp_path / "elsewhere").mkdir()
        (tmp_path / "elsewhere" / "f.txt").write_text("SSSS")
        shutil.rmtree(path / "d" / "e")
        (path / "d" / "e").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    sent = []
    with pytest.raises(Forbidden, match="not a regular file inside it"):
        for chunk in tar_stream(storage, "ck", plan):
            sent.append(chunk)
    assert b"SSSS" not in b"".join(sent)


def test_keys_that_are_not_relative_paths_are_left_out_of_the_plan() -> None:
    plan = plan_tar({"../x": 1, "a//b": 2, "/abs": 3, "./c": 4, "ok/": 0, "ok/f": 5}, mtime=0)
    assert [rel for rel, _, _ in plan.entries] == ["ok/", "ok/f"]


def test_prepare_refuses_what_is_outside_the_roots(storage: SharedFSStorage, tmp_path: Path) -> None:
    config = {"type": "shared_fs", "host_path": str(tmp_path)}
    inside = StorageRoots.of(config)
    ready = prepare("ck", config, inside, report_time=0)
    assert ready.tar.file_bytes == 513 + 1024 + 4 + 3
    elsewhere = StorageRoots.of({"type": "shared_fs", "host_path": str(tmp_path / "other")})
    with pytest.raises(Forbidden, match="is not served: checkpoint_storage.host_path"):
        prepare("ck", config, elsewhere, report_time=0)
    with pytest.raises(Forbidden, match="not a single path component"):
        prepare("..", config, inside, report_time=0)
    with pytest.raises(NotFound, match="has no files"):
        prepare("missing", config, inside, report_time=0)
