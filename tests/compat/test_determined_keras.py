"""Determined 0.38.1's Keras APIs, unmodified, on pedl as processes, with the real `det` CLI: the legacy
TFKerasTrial (`model_def:RegressionTrial`, run by Determined's launcher and harness) and the
DeterminedCallback of a `model.fit()` script under det.core.init(). Their task environment is
.venv-det-tf (`make det-tf-venv`: determined 0.38.1 and tensorflow-cpu 2.15, whose Keras 2 is what
determined.keras needs); the models are tests/e2e/models/det_keras, written for these tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.compat.test_determined_core_api import det, det_config, training_steps
from tests.compat.test_determined_trial_apis import _needs_task_info, validation_steps
from tests.e2e.conftest import MODELS, Cluster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]
MODEL = MODELS / "det_keras"
ENDED = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}
TF_VENV = Path(os.environ.get("PEDL_DET_TF_VENV") or Path(__file__).parents[2] / ".venv-det-tf")


@pytest.fixture(scope="module")
def keras_cluster(tmp_path_factory):
    if not (TF_VENV / "bin" / "python3").exists():
        missing = f"TensorFlow's task environment is not at {TF_VENV}: make det-tf-venv"
        if os.environ.get("CI"):
            pytest.fail(missing)
        pytest.skip(missing)
    _needs_task_info()
    c = Cluster(tmp_path_factory.mktemp("det-keras"), None).start()
    c.add_agent("keras-a", slots=1)
    yield c
    c.stop()


def keras_config(name: str, entrypoint: str, *, batches: int, metric: str = "val_loss", **hparams) -> dict:
    cfg = det_config(
        name,
        searcher={"name": "single", "metric": metric, "smaller_is_better": True, "max_length": {"batches": batches}},
    )
    cfg["entrypoint"] = entrypoint
    cfg["hyperparameters"] = {"global_batch_size": 8, "lr": 0.1, **hparams}
    cfg["environment"]["environment_variables"] = [
        f"PATH={TF_VENV / 'bin'}:/usr/local/bin:/usr/bin:/bin",
        "OMP_NUM_THREADS=1",
        "TF_CPP_MIN_LOG_LEVEL=2",
    ]
    return cfg


def completed_checkpoints(c: Cluster, trial_id: int) -> list[dict]:
    return [
        ck
        for ck in c.master.api("GET", f"/api/v1/trials/{trial_id}/checkpoints")["checkpoints"]
        if ck["state"] == "STATE_COMPLETED"
    ]


def test_a_tfkeras_trial_completes_with_metrics_and_a_checkpoint(keras_cluster, tmp_path):
    c = keras_cluster
    cfg = keras_config("keras-legacy", "model_def:RegressionTrial", batches=32)
    cfg["min_validation_period"] = {"batches": 16}
    cfg["scheduling_unit"] = 8
    exp_id = c.create(cfg, MODEL)
    exp = wait_experiment(c.master, exp_id, ENDED, timeout=300)
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    # Determined's own harness ran it, alone: the environment has no torch for Determined's launcher
    assert "Creating TFKerasTrialController with RegressionTrial" in logs
    assert training_steps(c, trial["id"]) == [8, 16, 24, 32]
    assert validation_steps(c, trial["id"]) == [16, 32]
    train = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert train[-1]["metrics"]["loss"] < train[0]["metrics"]["loss"]  # it trained
    validation = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="validation")["metrics"]
    assert {"val_loss", "val_mae"} <= set(validation[-1]["metrics"])  # Keras' own metric names, as Determined's
    described = c.master.api("GET", f"/api/v1/trials/{trial['id']}")["trial"]
    assert described["searcherMetricValue"] == pytest.approx(min(v["metrics"]["val_loss"] for v in validation))
    kept = completed_checkpoints(c, trial["id"])
    assert kept, "no checkpoint"
    out = tmp_path / "ckpt"
    det(c, "checkpoint", "download", kept[-1]["uuid"], "--output-dir", str(out))
    assert (out / "determined-keras-optimizer-weights.h5").is_file()  # what TFKerasTrial saves
    assert list(out.glob("determined-keras-model-weights*"))
    assert (out / "code" / "model_def.py").is_file()


def test_a_keras_fit_script_with_the_determined_callback_reports_checkpoints_and_resumes(keras_cluster):
    c = keras_cluster
    # 16 batches an epoch; pause after the first epoch's checkpoint, resume from it for the rest
    # the callback reports validation under Keras' own names (no val_ prefix)
    cfg = keras_config("keras-callback", "python3 train.py", batches=16 * 4, metric="loss", epochs=4, delay=0.25)
    exp_id = c.create(cfg, MODEL)
    wait_for(
        lambda: c.trials(exp_id) and completed_checkpoints(c, c.trials(exp_id)[0]["id"]),
        240,
        what="the first epoch's checkpoint",
    )
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: c.trials(exp_id)[0]["state"] == "STATE_PAUSED", 120, what="the trial paused")
    (trial,) = c.trials(exp_id)
    paused_at = training_steps(c, trial["id"])[-1]
    assert paused_at < 64 and paused_at % 16 == 0, paused_at  # it left at an epoch's end
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/activate")
    exp = wait_experiment(c.master, exp_id, ENDED, timeout=300)
    (trial,) = c.trials(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    steps = training_steps(c, trial["id"])
    assert steps == sorted(set(steps)) and steps[-1] == 64, steps  # none twice, in order, to the end
    assert validation_steps(c, trial["id"]) == [16, 32, 48, 64]  # one validation an epoch
    assert [ck["metadata"]["steps_completed"] for ck in completed_checkpoints(c, trial["id"])][-1] == 64
