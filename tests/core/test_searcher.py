"""pedl.core.searcher: one operation per trial, its length, progress and completion reports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import pedl.core
from pedl.core.searcher import length_from_config

from .fake_master import FakeMaster

COMPLETED = "/api/v1/trials/3/searcher/completed_operation"


def test_one_operation_with_the_configured_length(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        ops = core.searcher.operations()
        op = next(ops)
        assert op.length == 30
        op.report_progress(15)
        op.report_progress(45)  # past the end counts as done
        op.report_completed(0.125)
        assert list(ops) == []
    progress = [c.body for c in fake_master.calls("POST", "/api/v1/trials/3/progress")]
    assert progress == [{"progress": 0.5, "is_raw": False}, {"progress": 1.0, "is_raw": False}]
    [done] = fake_master.calls("POST", COMPLETED)
    assert done.body == {"op": {"length": 30}, "searcherMetric": 0.125}


def test_non_finite_searcher_metric(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        for op in core.searcher.operations():
            op.report_completed(float("nan"))
    assert fake_master.calls("POST", COMPLETED)[0].body["searcherMetric"] == "NaN"


def test_operation_must_be_completed(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core, pytest.raises(RuntimeError, match="report_completed"):
        for _op in core.searcher.operations():
            pass


def test_operation_completes_once(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        op = next(core.searcher.operations())
        op.report_completed(1.0)
        with pytest.raises(RuntimeError, match="already"):
            op.report_completed(1.0)


def test_missing_max_length_is_explained(
    fake_master: FakeMaster, on_cluster: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = json.loads(os.environ["DET_EXPERIMENT_CONFIG"])
    config["searcher"]["max_length"] = None
    monkeypatch.setenv("DET_EXPERIMENT_CONFIG", json.dumps(config))
    with pedl.core.init() as core, pytest.raises(RuntimeError, match="searcher.max_length"):
        next(core.searcher.operations())


@pytest.mark.parametrize(
    ("max_length", "expected"),
    [
        (100, 100),
        ({"batches": 7}, 7),
        ({"batches": None, "epochs": 3, "records": None}, 3),
        (None, None),
    ],
)
def test_length_from_config(max_length: object, expected: int | None) -> None:
    assert length_from_config({"searcher": {"max_length": max_length}}) == expected


def test_length_from_config_refuses_garbage() -> None:
    with pytest.raises(ValueError, match="max_length"):
        length_from_config({"searcher": {"max_length": "long"}})


def test_local_length_defaults_to_100(off_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pedl.core.init(checkpoint_storage=tmp_path) as core:
        for op in core.searcher.operations():
            assert op.length == 100
            op.report_progress(50)
            op.report_completed(0.5)
    assert "[pedl] searcher operation completed: length=100 searcher_metric=0.5" in capsys.readouterr().out


def test_local_length_from_init(off_cluster: None, tmp_path: Path) -> None:
    with pedl.core.init(checkpoint_storage=tmp_path, max_length=12) as core:
        assert next(core.searcher.operations()).length == 12
