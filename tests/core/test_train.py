"""pedl.core.train: metric and progress reports to the master, and the printing local twin."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import pedl.core
import pedl.errors

from .fake_master import TOKEN, FakeMaster

METRICS = "/api/v1/trials/3/metrics"


def test_training_metrics_body(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        core.train.report_training_metrics(
            steps_completed=50, metrics={"loss": 0.25, "bad": math.nan, "big": math.inf, "acc": np.float32(0.5)}
        )
    [call] = fake_master.calls("POST", METRICS)
    assert call.headers["authorization"] == f"Bearer {TOKEN}"
    body = call.body
    assert body["group"] == "training"
    inner = body["metrics"]
    assert "reportTime" not in inner  # the master stamps it when it stores the report
    assert inner == {
        "trialId": 3,
        "trialRunId": 1,
        "stepsCompleted": 50,
        "metrics": {"avgMetrics": {"loss": 0.25, "bad": "NaN", "big": "Infinity", "acc": 0.5}, "batchMetrics": []},
    }


def test_batch_metrics_are_sent(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        core.train.report_training_metrics(
            steps_completed=2, metrics={"loss": 1.0}, batch_metrics=[{"loss": 1.5}, {"loss": -math.inf}]
        )
    [call] = fake_master.calls("POST", METRICS)
    assert call.body["metrics"]["metrics"]["batchMetrics"] == [{"loss": 1.5}, {"loss": "-Infinity"}]


def test_validation_metrics_body(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        core.train.report_validation_metrics(steps_completed=np.int64(100), metrics={"validation_loss": 0.1})
    [call] = fake_master.calls("POST", METRICS)
    assert call.body["group"] == "validation"
    assert call.body["metrics"]["stepsCompleted"] == 100
    assert call.body["metrics"]["metrics"]["avgMetrics"] == {"validation_loss": 0.1}


def test_reports_arrive_in_order(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.fail("POST", METRICS, 503)
    with pedl.core.init() as core:
        for step in (10, 20, 30):
            core.train.report_training_metrics(steps_completed=step, metrics={"loss": 1.0 / step})
    assert [r["metrics"]["stepsCompleted"] for r in fake_master.metric_reports()] == [10, 20, 30]


def test_progress_body(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core:
        core.train.report_progress(0.25)
        with pytest.raises(ValueError, match="between 0 and 1"):
            core.train.report_progress(1.5)
    [call] = fake_master.calls("POST", "/api/v1/trials/3/progress")
    assert call.body == {"progress": 0.25, "is_raw": False}


@pytest.mark.parametrize("steps", [-1, 1.5, True, "10"])
def test_bad_steps_completed_is_refused(fake_master: FakeMaster, on_cluster: Path, steps: object) -> None:
    with pedl.core.init() as core, pytest.raises((TypeError, ValueError), match="steps_completed"):
        core.train.report_training_metrics(steps_completed=steps, metrics={"loss": 1.0})
    assert fake_master.calls("POST", METRICS) == []


def test_metrics_must_be_a_dict(fake_master: FakeMaster, on_cluster: Path) -> None:
    with pedl.core.init() as core, pytest.raises(TypeError, match="metrics must be a dict"):
        core.train.report_training_metrics(steps_completed=1, metrics=[0.5])


def test_4xx_from_the_master_is_raised(fake_master: FakeMaster, on_cluster: Path) -> None:
    fake_master.fail("POST", METRICS, 400)
    # reports go out in the background; a refused one is raised by the next call, or at the latest
    # when the context closes, so the trial cannot end as if it had been stored
    with pytest.raises(pedl.errors.InvalidArgument, match="HTTP 400"), pedl.core.init() as core:
        core.train.report_training_metrics(steps_completed=1, metrics={"loss": 1.0})


def test_local_prints_one_line_per_report(
    off_cluster: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pedl.core.init(checkpoint_storage=tmp_path) as core:
        capsys.readouterr()
        core.train.report_training_metrics(steps_completed=5, metrics={"loss": 0.5, "acc": math.nan})
        core.train.report_validation_metrics(steps_completed=5, metrics={"validation_loss": 0.25})
        core.train.report_progress(0.5)
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "[pedl] training metrics: steps_completed=5 loss=0.5 acc=nan",
        "[pedl] validation metrics: steps_completed=5 validation_loss=0.25",
    ]
