"""Deleting some entries of a checkpoint from its storage: on shared_fs a symlink is unlinked, never
followed, even one swapped in for a directory after the listing; entries already gone are no error;
on S3 (moto) exactly the listed keys go."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from pedl.common.checkpoint_storage import S3Storage, SharedFSStorage
from pedl.errors import Forbidden, InvalidArgument
from pedl.master.checkpoints.file_removal import remove_entries
from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401

UUID = "5f0b7a52-0c1e-4c7e-9a51-3a1f1b2c3d4e"


def _checkpoint(tmp_path: Path) -> tuple[SharedFSStorage, Path]:
    storage = SharedFSStorage(tmp_path / "store")
    with storage.store_path(UUID) as path:
        (path / "a.pt").write_text("a")
        (path / "sub" / "deeper").mkdir(parents=True)
        (path / "sub" / "b.pt").write_text("b")
        (path / "sub" / "deeper" / "c.pt").write_text("c")
        (path / "keep.txt").write_text("k")
    return storage, storage.path_of(UUID)


def test_files_and_directories_go_and_the_rest_stays(tmp_path: Path) -> None:
    storage, root = _checkpoint(tmp_path)
    remove_entries(storage, UUID, {"a.pt", "sub/", "sub/b.pt", "sub/deeper/", "sub/deeper/c.pt", "gone.pt"})
    assert storage.resources(UUID) == {"keep.txt": 1}
    remove_entries(storage, UUID, {"a.pt"})  # already gone: fine
    assert root.is_dir()


def test_a_symlink_is_unlinked_and_its_target_kept(tmp_path: Path) -> None:
    storage, root = _checkpoint(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("s")
    (root / "link").symlink_to(tmp_path / "outside" / "secret")
    remove_entries(storage, UUID, {"link"})
    assert not (root / "link").exists() and (tmp_path / "outside" / "secret").read_text() == "s"


def test_a_directory_swapped_for_a_symlink_is_refused(tmp_path: Path) -> None:
    """Listed as a directory, then replaced by a link to elsewhere: neither the entries below it nor
    the directory itself are reached through the link."""
    storage, root = _checkpoint(tmp_path)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "b.pt").write_text("not yours")
    (tmp_path / "outside" / "deeper").mkdir()
    (root / "sub" / "b.pt").unlink()
    (root / "sub" / "deeper" / "c.pt").unlink()
    (root / "sub" / "deeper").rmdir()
    (root / "sub").rmdir()
    (root / "sub").symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(Forbidden, match="not a directory inside the checkpoint"):
        remove_entries(storage, UUID, {"sub/b.pt"})
    with pytest.raises(Exception, match="symbolic link"):
        remove_entries(storage, UUID, {"sub/"})
    assert (tmp_path / "outside" / "b.pt").read_text() == "not yours" and (tmp_path / "outside" / "deeper").is_dir()


def test_a_checkpoint_directory_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path / "store")
    storage.base_path.mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x").write_text("x")
    storage.path_of(UUID).symlink_to(tmp_path / "outside", target_is_directory=True)
    with pytest.raises(Forbidden, match="symbolic link"):
        remove_entries(storage, UUID, {"x"})
    assert (tmp_path / "outside" / "x").exists()


def test_s3_keys_go(moto_endpoint: str, tmp_path: Path) -> None:
    boto3.client("s3", endpoint_url=moto_endpoint, region_name="us-east-1").create_bucket(Bucket="rm-bucket")
    storage = S3Storage("rm-bucket", prefix="runs", endpoint_url=moto_endpoint)
    with storage.store_path(UUID) as path:
        (path / "a.pt").write_text("a")
        (path / "sub").mkdir()
        (path / "sub" / "b.pt").write_text("b")
        (path / "keep.txt").write_text("k")
    assert sorted(storage.resources(UUID)) == ["a.pt", "keep.txt", "sub/", "sub/b.pt"]
    remove_entries(storage, UUID, {"a.pt", "sub/", "sub/b.pt", "never-was"})
    assert storage.resources(UUID) == {"keep.txt": 1}


def test_other_storage_is_refused(tmp_path: Path) -> None:
    class Elsewhere(S3Storage.__mro__[1]):  # TransferStorage: neither shared_fs nor S3
        def upload(self, src, uuid): ...
        def download(self, uuid, dst): ...
        def resources(self, uuid):
            return {}

        def delete(self, uuid): ...

    with pytest.raises(InvalidArgument, match="not supported"):
        remove_entries(Elsewhere(), UUID, {"a"})
