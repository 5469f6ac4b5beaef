"""The real det CLI (determined==0.38.1) with Determined 0.38's searcher config: `det e create
--test-mode` validates an adaptive_asha config with time_metric / max_time, then runs its one-batch
single-searcher twin to completion; a time_metric without max_time is refused naming the field."""

from __future__ import annotations

import pytest
import yaml

from tests.compat.test_det_cli import DET, det
from tests.e2e.conftest import MODELS, Cluster, steps_config

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def det_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET} (make det-venv could not install the package)")
    c = Cluster(tmp_path_factory.mktemp("det-searcher"), None).start()
    c.add_agent("det-agent-1", slots=1)
    yield c
    c.stop()


def asha_config(**searcher: object) -> dict:
    cfg = steps_config(name="asha-time", steps=4, delay=0.01)
    cfg["hyperparameters"]["lr"] = {"type": "double", "minval": 0.1, "maxval": 1.0}
    cfg["searcher"] = {
        "name": "adaptive_asha",
        "metric": "validation_loss",
        "max_trials": 2,
        "max_rungs": 2,
        "mode": "aggressive",
        "divisor": 2,
        **searcher,
    }
    return cfg


def test_test_mode_validates_a_time_metric_config_and_runs_its_twin(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "adaptive.yaml"
    cfg.write_text(yaml.safe_dump(asha_config(time_metric="batches", max_time=4)))
    proc = det(det_cluster, "experiment", "create", "--test-mode", str(cfg), str(MODELS / "steps"))
    assert "Model definition test succeeded" in proc.stdout, proc


def test_a_time_metric_without_max_time_is_refused_naming_the_field(det_cluster, tmp_path) -> None:
    cfg = tmp_path / "half.yaml"
    cfg.write_text(yaml.safe_dump(asha_config(time_metric="batches")))
    proc = det(det_cluster, "experiment", "create", str(cfg), str(MODELS / "steps"), check=False)
    assert proc.returncode != 0 and "searcher.max_time" in proc.stdout + proc.stderr, proc
