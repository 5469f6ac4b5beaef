"""pedl.common.checkpoint_storage: shared_fs layout, the storage interface, config parsing, and
symlinks, which are never part of a checkpoint and never followed."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pedl.common.checkpoint_files import list_directory
from pedl.common.checkpoint_storage import (
    SharedFSStorage,
    TransferStorage,
    storage_from_config,
)
from pedl.errors import Forbidden, InvalidArgument

UUID = "0b542e90-dd3e-4523-8ea6-c5f48e47a2b0"


def test_shared_fs_stores_under_host_path_and_storage_path(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path, "exp/ckpts")
    with storage.store_path(UUID) as path:
        assert path == tmp_path / "exp" / "ckpts" / UUID
        (path / "weights.bin").write_bytes(b"x" * 10)
        (path / "sub").mkdir()
        (path / "sub" / "state.json").write_text("{}")
    assert storage.exists(UUID)
    assert storage.resources(UUID) == {"sub/": 0, "weights.bin": 10, "sub/state.json": 2}
    with storage.restore_path(UUID) as path:
        assert (path / "weights.bin").read_bytes() == b"x" * 10


def test_shared_fs_without_storage_path(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path)
    with storage.store_path(UUID) as path:
        assert path == tmp_path / UUID


def test_absolute_storage_path_inside_host_path_is_accepted(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path, str(tmp_path / "inner"))
    assert storage.base_path == tmp_path / "inner"


def test_storage_path_outside_host_path_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument, match="must be inside host_path"):
        SharedFSStorage(tmp_path / "a", str(tmp_path / "b"))
    with pytest.raises(InvalidArgument, match="must be inside host_path"):
        SharedFSStorage(tmp_path / "a", "../b")


def test_failed_store_keeps_nothing(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path)
    with pytest.raises(RuntimeError), storage.store_path(UUID) as path:
        (path / "half").write_text("written")
        raise RuntimeError("training crashed mid-checkpoint")
    assert not (tmp_path / UUID).exists()
    assert storage.resources(UUID) == {}


def test_restore_of_missing_checkpoint_names_it(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path)
    with pytest.raises(FileNotFoundError, match=UUID), storage.restore_path(UUID):
        pass


def test_delete_is_idempotent(tmp_path: Path) -> None:
    storage = SharedFSStorage(tmp_path)
    with storage.store_path(UUID) as path:
        (path / "f").write_text("1")
    storage.delete(UUID)
    assert not storage.exists(UUID)
    storage.delete(UUID)


@pytest.mark.parametrize("bad", ["", ".", "..", "../x", "a/b", "a\\b"])
def test_uuids_that_could_escape_the_base_are_refused(tmp_path: Path, bad: str) -> None:
    storage = SharedFSStorage(tmp_path)
    with pytest.raises(ValueError, match="invalid checkpoint uuid"), storage.store_path(bad):
        pass


def test_list_directory_marks_directories(tmp_path: Path) -> None:
    (tmp_path / "d" / "e").mkdir(parents=True)
    (tmp_path / "d" / "e" / "f.txt").write_text("abc")
    assert list_directory(tmp_path) == {"d/": 0, "d/e/": 0, "d/e/f.txt": 3}


def test_storage_from_config_shared_fs(tmp_path: Path) -> None:
    storage = storage_from_config(
        {"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "s", "save_trial_best": 1}
    )
    assert isinstance(storage, SharedFSStorage)
    assert storage.base_path == tmp_path / "s"


def test_directory_storage_in_a_task_is_its_container_path(tmp_path: Path) -> None:
    """In the task the files are at container_path; the master's host_path is not the task's business."""
    storage = storage_from_config(
        {"type": "directory", "container_path": str(tmp_path / "c"), "host_path": "/elsewhere", "save_trial_best": 1}
    )
    assert isinstance(storage, SharedFSStorage)
    assert storage.base_path == tmp_path / "c"


def test_storage_from_config_accepts_the_config_model(tmp_path: Path) -> None:
    from pedl.config.experiment_config import SharedFSStorageConfig

    storage = storage_from_config(SharedFSStorageConfig(host_path=str(tmp_path)))
    assert isinstance(storage, SharedFSStorage)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"type": "shared_fs"}, "host_path is required"),
        ({"type": "s3"}, "bucket is required"),
        ({"type": "directory"}, "container_path is required"),
        ({"type": "gcs", "bucket": "b"}, "gcs checkpoint storage is not supported"),
        ({"type": "floppy"}, "unknown checkpoint_storage.type 'floppy'"),
    ],
)
def test_storage_from_config_errors(config: dict, message: str) -> None:
    with pytest.raises(InvalidArgument, match=message):
        storage_from_config(config)


class InMemoryStorage(TransferStorage):
    """What an object store looks like to the interface: whole directories moved in and out."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, bytes]] = {}

    def upload(self, src: Path, uuid: str) -> None:
        self.objects[uuid] = {p.relative_to(src).as_posix(): p.read_bytes() for p in src.rglob("*") if p.is_file()}

    def download(self, uuid: str, dst: Path) -> None:
        if uuid not in self.objects:
            raise FileNotFoundError(uuid)
        for name, data in self.objects[uuid].items():
            (dst / name).parent.mkdir(parents=True, exist_ok=True)
            (dst / name).write_bytes(data)

    def resources(self, uuid: str) -> dict[str, int]:
        return {name: len(data) for name, data in self.objects.get(uuid, {}).items()}

    def delete(self, uuid: str) -> None:
        self.objects.pop(uuid, None)


def test_transfer_storage_uploads_on_exit_and_cleans_its_temp_dirs() -> None:
    storage = InMemoryStorage()
    with storage.store_path(UUID) as path:
        (path / "a").mkdir()
        (path / "a" / "w.bin").write_bytes(b"123")
        written = path
    assert not written.exists()
    assert storage.resources(UUID) == {"a/w.bin": 3}
    with storage.restore_path(UUID) as path:
        assert (path / "a" / "w.bin").read_bytes() == b"123"
        restored = path
    assert not restored.exists()


def test_transfer_storage_uploads_nothing_when_the_block_fails() -> None:
    storage = InMemoryStorage()
    with pytest.raises(KeyError), storage.store_path(UUID) as path:
        (path / "x").write_text("1")
        raise KeyError("boom")
    assert storage.objects == {}


def test_shared_fs_paths_are_plain_directories(tmp_path: Path) -> None:
    # The master deletes checkpoints with the same class; a copied tree must stay deletable.
    storage = SharedFSStorage(tmp_path)
    with storage.store_path(UUID) as path:
        shutil.copytree(Path(__file__).parent, path / "copy", ignore=shutil.ignore_patterns("__pycache__"))
    storage.delete(UUID)
    assert not (tmp_path / UUID).exists()


# -- symlinks and special files ----------------------------------------------------------


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("TOP-SECRET")
    return tmp_path / "outside" / "secret.txt"


def test_list_directory_leaves_out_links_and_special_files(tmp_path: Path, secret: Path) -> None:
    """A dangling symlink crashed the listing (and so pedl.core's store_path); a link to a file
    outside was listed with its target's size."""
    root = tmp_path / "ck"
    (root / "d").mkdir(parents=True)
    (root / "d" / "f.txt").write_text("abc")
    (root / "link").symlink_to(secret)
    (root / "dir-link").symlink_to(secret.parent, target_is_directory=True)
    (root / "dangling").symlink_to(tmp_path / "nowhere")
    (root / "d" / "inner").symlink_to("f.txt")
    os.mkfifo(root / "fifo")
    assert list_directory(root) == {"d/": 0, "d/f.txt": 3}


def test_open_file_does_not_follow_links(tmp_path: Path, secret: Path) -> None:
    storage = SharedFSStorage(tmp_path / "base")
    with storage.store_path(UUID) as path:
        (path / "real.txt").write_text("ok")
        (path / "link").symlink_to(secret)
        (path / "d").symlink_to(secret.parent, target_is_directory=True)
        os.mkfifo(path / "fifo")
    with storage.open_file(UUID, "real.txt") as f:
        assert f.read() == b"ok"
    for rel in ("link", "d/secret.txt", "fifo"):
        with pytest.raises(Forbidden, match="not a regular file inside it"), storage.open_file(UUID, rel):
            pass


def test_delete_unlinks_links_and_never_their_targets(tmp_path: Path, secret: Path) -> None:
    storage = SharedFSStorage(tmp_path / "base")
    with storage.store_path(UUID) as path:
        (path / "link").symlink_to(secret)
        (path / "d").mkdir()
        (path / "d" / "dir-link").symlink_to(secret.parent, target_is_directory=True)
        (path / "dangling").symlink_to(tmp_path / "nowhere")
    storage.delete(UUID)
    assert not path.exists()
    assert secret.read_text() == "TOP-SECRET"


def test_a_checkpoint_directory_that_is_a_link_is_refused(tmp_path: Path, secret: Path) -> None:
    storage = SharedFSStorage(tmp_path / "base")
    storage.base_path.mkdir()
    storage.path_of(UUID).symlink_to(secret.parent, target_is_directory=True)
    assert not storage.exists(UUID)
    for act in (storage.delete, storage.resources):
        with pytest.raises(Forbidden, match="is a symbolic link"):
            act(UUID)
    with pytest.raises(Forbidden, match="is a symbolic link"), storage.open_file(UUID, "secret.txt"):
        pass
    assert secret.read_text() == "TOP-SECRET"


def _unlink_failing(monkeypatch: pytest.MonkeyPatch, suffix: str, error: OSError) -> None:
    unlink = os.unlink

    def failing(name: str, *args: object, **kwargs: object) -> None:
        if os.fspath(name).endswith(suffix):
            unlink(name, *args, **kwargs)
            raise error
        unlink(name, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", failing)


def test_delete_raises_what_it_cannot_remove(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed deletion must not pass for a done one (garbage collection would mark the row deleted)."""
    storage = SharedFSStorage(tmp_path / "base")
    with storage.store_path(UUID) as path:
        (path / "stuck").write_text("1")
    _unlink_failing(monkeypatch, "stuck", PermissionError(13, "Permission denied"))
    with pytest.raises(PermissionError):
        storage.delete(UUID)
    assert path.exists()


def test_delete_tolerates_files_removed_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage = SharedFSStorage(tmp_path / "base")
    with storage.store_path(UUID) as path:
        (path / "d").mkdir()
        (path / "d" / "gone").write_text("1")
    _unlink_failing(monkeypatch, "gone", FileNotFoundError(2, "No such file or directory"))
    storage.delete(UUID)
    assert not path.exists()
