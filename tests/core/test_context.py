"""pedl.core.init: the cluster wiring from DET_* variables, and the local stand-ins."""

from __future__ import annotations

from pathlib import Path

import pytest

import pedl.core
from pedl.common.checkpoint_storage import SharedFSStorage
from pedl.config.loading import ConfigError
from pedl.core.checkpoint import LocalCheckpointContext, MasterCheckpointContext
from pedl.core.context import first_grid_point

from .fake_master import FakeMaster

GRID_YAML = """
name: t
entrypoint: python3 train.py
hyperparameters:
  learning_rate: {type: log, base: 10, minval: -3, maxval: -1, count: 3}
  layers: {type: int, minval: 2, maxval: 4, count: 3}
  act: {type: categorical, vals: [tanh, relu]}
  opt:
    momentum: 0.9
searcher: {name: grid, metric: validation_loss, max_length: {batches: 40}}
"""


def test_cluster_context(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init(hparams={"ignored": True}, max_length=5) as core:
        assert core.info is not None and core.info.trial is not None
        assert core.hparams == {"learning_rate": 0.05}
        assert core.config["searcher"]["metric"] == "validation_loss"
        assert isinstance(core.checkpoint, MasterCheckpointContext)
        assert core.distributed.size == 1
        assert next(core.searcher.operations()).length == 30


def test_cluster_needs_a_trial_task(fake_master: FakeMaster, on_cluster: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DET_TRIAL_ID")
    monkeypatch.setenv("DET_TASK_TYPE", "COMMAND")
    with pytest.raises(RuntimeError, match="trial tasks; this task is COMMAND"):
        pedl.core.init()


def test_local_context_from_a_config_file(off_cluster: None, tmp_path: Path) -> None:
    config = tmp_path / "grid.yaml"
    config.write_text(GRID_YAML)
    with pedl.core.init(config=config, hparams={"act": "relu"}, checkpoint_storage=tmp_path / "c") as core:
        assert core.info is None
        assert core.hparams == {
            "learning_rate": pytest.approx(0.001),
            "layers": 2,
            "act": "relu",
            "opt": {"momentum": 0.9},
        }
        assert core.config["searcher"]["name"] == "grid"
        assert core.config["max_restarts"] == 5  # defaulted like the master does
        assert next(core.searcher.operations()).length == 40
        assert isinstance(core.checkpoint, LocalCheckpointContext)
        assert isinstance(core.checkpoint.storage, SharedFSStorage)
        assert core.checkpoint.storage.base_path == tmp_path / "c"


def test_local_max_length_overrides_the_config(off_cluster: None, tmp_path: Path) -> None:
    config = tmp_path / "grid.yaml"
    config.write_text(GRID_YAML)
    with pedl.core.init(config=config, max_length=3, checkpoint_storage=tmp_path) as core:
        assert next(core.searcher.operations()).length == 3


def test_local_bad_config_is_a_config_error(off_cluster: None, tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        pedl.core.init(config={"searcher": {"name": "grid"}}, checkpoint_storage=tmp_path)


def test_local_storage_from_a_config_dict(off_cluster: None, tmp_path: Path) -> None:
    with pedl.core.init(
        checkpoint_storage={"type": "shared_fs", "host_path": str(tmp_path), "storage_path": "x"}
    ) as core:
        assert core.checkpoint.storage.base_path == tmp_path / "x"


def test_local_announces_itself(off_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pedl.core.init(checkpoint_storage=tmp_path).close()
    assert capsys.readouterr().out == (
        f"[pedl] not on a cluster: metrics are printed here, checkpoints go to {tmp_path}\n"
    )


def test_first_grid_point() -> None:
    tree = {
        "a": {"type": "const", "val": 1},
        "b": {"type": "double", "minval": 0.5, "maxval": 1.0},
        "c": {"type": "log", "base": 2, "minval": 3, "maxval": 5},
        "d": 7,
        "e": {"f": {"type": "categorical", "vals": ["x", "y"]}},
    }
    assert first_grid_point(tree) == {"a": 1, "b": 0.5, "c": 8.0, "d": 7, "e": {"f": "x"}}
