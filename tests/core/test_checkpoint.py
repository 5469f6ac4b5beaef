"""pedl.core.checkpoint: store/restore with shared_fs, the report to the master, the local twin."""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path

import pytest

import pedl.core
import pedl.errors

from .fake_master import FakeMaster


def test_store_path_writes_to_shared_fs_and_reports(fake_master: FakeMaster, on_cluster: Path) -> None:
    with (
        pedl.core.init() as core,
        core.checkpoint.store_path({"steps_completed": 20, "note": "mid"}) as (path, storage_id),
    ):
        assert path == on_cluster / "exp" / storage_id
        (path / "weights.npz").write_bytes(b"0123456789")
        (path / "opt").mkdir()
        (path / "opt" / "state.json").write_text("{}")
    [call] = fake_master.calls("POST", "/api/v1/checkpoints")
    checkpoint = call.body["checkpoint"]
    datetime.fromisoformat(checkpoint.pop("reportTime").replace("Z", "+00:00"))
    metadata_size = (on_cluster / "exp" / storage_id / "metadata.json").stat().st_size
    assert checkpoint == {
        "uuid": storage_id,
        "allocationId": "3.1.0",
        "taskId": "3.1",
        "resources": {"opt/": "0", "weights.npz": "10", "metadata.json": str(metadata_size), "opt/state.json": "2"},
        "metadata": {"steps_completed": 20, "note": "mid"},
        "state": "STATE_COMPLETED",
        "training": {"trialId": 3},
    }
    written = json.loads((on_cluster / "exp" / storage_id / "metadata.json").read_text())
    assert written == {"steps_completed": 20, "note": "mid"}


def test_restore_path_and_get_metadata(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        with core.checkpoint.store_path({"steps_completed": 7}) as (path, storage_id):
            (path / "w.txt").write_text("weights")
        with core.checkpoint.restore_path(storage_id) as path:
            assert (path / "w.txt").read_text() == "weights"
        assert core.checkpoint.get_metadata(storage_id) == {"steps_completed": 7}
    assert fake_master.calls("GET", f"/api/v1/checkpoints/{storage_id}")


def test_get_metadata_of_unknown_checkpoint_is_not_found(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core, pytest.raises(pedl.errors.NotFound):
        core.checkpoint.get_metadata("no-such-uuid")


def test_steps_completed_is_required(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        with pytest.raises(ValueError, match="steps_completed"), core.checkpoint.store_path({"epoch": 1}):
            pass
        with pytest.raises(TypeError, match="steps_completed"), core.checkpoint.store_path({"steps_completed": "ten"}):
            pass
    assert fake_master.calls("POST", "/api/v1/checkpoints") == []
    assert not (on_cluster / "exp").exists() or not any((on_cluster / "exp").iterdir())


def test_failed_block_keeps_and_reports_nothing(fake_master: FakeMaster, on_cluster: Path) -> None:
    with (
        pedl.core.init() as core,
        pytest.raises(OSError, match="disk full"),
        core.checkpoint.store_path({"steps_completed": 1}) as (path, _),
    ):
        (path / "partial").write_text("x")
        raise OSError("disk full")
    assert fake_master.calls("POST", "/api/v1/checkpoints") == []
    assert not any((on_cluster / "exp").iterdir())


def test_checkpoint_report_is_retried(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.fail("POST", "/api/v1/checkpoints", 503, 500)
    with pedl.core.init() as core, core.checkpoint.store_path({"steps_completed": 3}) as (path, sid):
        (path / "f").write_text("1")
    assert list(fake_master.checkpoints) == [sid]


def test_upload_and_download(fake_master: FakeMaster, on_cluster: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "f.bin").write_bytes(b"abc")
    with pedl.core.init() as core:
        storage_id = core.checkpoint.upload(src, {"steps_completed": 4})
        core.checkpoint.download(storage_id, tmp_path / "dst")
    assert (tmp_path / "dst" / "d" / "f.bin").read_bytes() == b"abc"
    assert fake_master.checkpoints[storage_id]["resources"]["d/f.bin"] == "3"


def test_a_dangling_symlink_does_not_crash_the_trial(fake_master: FakeMaster, on_cluster: Path, tmp_path: Path) -> None:
    """A trial that leaves a dangling symlink in its checkpoint stores it (a listing that stat'ed the link
    would crash). Links are not part of a checkpoint: not reported, not followed."""
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    with pedl.core.init() as core:
        with core.checkpoint.store_path({"steps_completed": 5}) as (path, storage_id):
            (path / "w.bin").write_bytes(b"w" * 4)
            (path / "dangling").symlink_to(tmp_path / "nowhere")
            (path / "to-secret").symlink_to(tmp_path / "secret.txt")
        src = tmp_path / "src"
        src.mkdir()
        (src / "f.bin").write_bytes(b"abc")
        (src / "dangling").symlink_to(tmp_path / "nowhere")
        uploaded = core.checkpoint.upload(src, {"steps_completed": 6})
        core.checkpoint.download(storage_id, tmp_path / "dst")
    resources = fake_master.checkpoints[storage_id]["resources"]
    assert set(resources) == {"w.bin", "metadata.json"}
    assert set(fake_master.checkpoints[uploaded]["resources"]) == {"f.bin", "metadata.json"}
    assert (tmp_path / "dst" / "w.bin").read_bytes() == b"w" * 4


def test_missing_storage_config_is_explained(
    fake_master: FakeMaster, on_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.loads(os.environ["DET_EXPERIMENT_CONFIG"])
    config["checkpoint_storage"] = None
    monkeypatch.setenv("DET_EXPERIMENT_CONFIG", json.dumps(config))
    with (
        pedl.core.init() as core,
        pytest.raises(RuntimeError, match="no checkpoint_storage"),
        core.checkpoint.store_path({"steps_completed": 1}),
    ):
        pass


def test_init_storage_argument_overrides_the_config(fake_master: FakeMaster, on_cluster: Path, tmp_path: Path) -> None:
    with (
        pedl.core.init(checkpoint_storage=tmp_path / "mine") as core,
        core.checkpoint.store_path({"steps_completed": 1}) as (path, storage_id),
    ):
        assert path == tmp_path / "mine" / storage_id


def test_local_checkpoints_go_to_the_given_directory(
    off_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pedl.core.init(checkpoint_storage=tmp_path / "ckpts") as core:
        with core.checkpoint.store_path({"steps_completed": 9}) as (path, storage_id):
            (path / "w").write_text("1")
        assert path == tmp_path / "ckpts" / storage_id
        assert core.checkpoint.get_metadata(storage_id) == {"steps_completed": 9}
        with core.checkpoint.restore_path(storage_id) as restored:
            assert (restored / "w").read_text() == "1"
    assert f"[pedl] checkpoint {storage_id} stored at {path} (steps_completed=9)" in capsys.readouterr().out


def test_local_default_is_checkpoints_in_the_working_directory(
    off_cluster: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pedl.core.init() as core, core.checkpoint.store_path({"steps_completed": 1}) as (path, sid):
        pass
    assert path == tmp_path / "checkpoints" / sid
