"""Determined's Trial APIs: the legacy entrypoint and the config a trial is handed (pure)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pedl.config.experiment_config import parse_experiment_config
from pedl.config.loading import ConfigError
from pedl.config.trial_api import (
    UNLOADABLE_TRIAL_EXIT,
    determined_trial_config,
    is_legacy_entrypoint,
    task_entrypoint,
)

BASE = "entrypoint: model_def:MyTrial\nsearcher: {name: single, metric: loss, max_length: 10}\n"


@pytest.mark.parametrize(
    ("entrypoint", "legacy"),
    [
        ("model_def:MyTrial", True),
        ("pkg.sub.model:Trial_2", True),
        ("python3 train.py", False),
        ("model_def:My.Trial", False),
        ("a:b:c", False),
        (["model_def:MyTrial"], False),
    ],
)
def test_a_legacy_entrypoint_is_determineds_module_colon_class(entrypoint, legacy):
    assert is_legacy_entrypoint(entrypoint) is legacy


def test_a_trial_class_runs_through_determineds_launcher_after_a_load_check():
    argv = task_entrypoint("model_def:MyTrial")
    assert argv[:2] == ["python3", "-c"] and argv[-1] == "model_def:MyTrial"
    check = argv[2]
    compile(check, "<load check>", "exec")  # plain Python the task's own interpreter runs
    assert "determined.launch.torch_distributed" in check and "--trial" in check
    assert f"sys.exit({UNLOADABLE_TRIAL_EXIT})" in check
    assert task_entrypoint("python3 train.py") == "python3 train.py"
    assert task_entrypoint(["python3", "train.py"]) == ["python3", "train.py"]


def test_the_trial_config_has_every_default_determineds_harness_indexes():
    stored = parse_experiment_config(BASE).model_dump()
    stored["reproducibility"]["experiment_seed"] = 1234
    out = determined_trial_config(stored)
    assert out["optimizations"]["aggregation_frequency"] == 1
    assert out["optimizations"]["gradient_compression"] is False
    assert out["optimizations"]["average_aggregated_gradients"] is True
    assert out["min_validation_period"] == {"batches": 0} and out["min_checkpoint_period"] == {"batches": 0}
    assert out["scheduling_unit"] == 100 and out["checkpoint_policy"] == "best"
    assert out["perform_initial_validation"] is False
    assert out["profiling"]["enabled"] is False and out["profiling"]["begin_on_batch"] == 0
    assert out["resources"]["native_parallel"] is False and out["resources"]["slots_per_trial"] == 1
    assert out["reproducibility"]["experiment_seed"] == 1234
    assert out["searcher"]["max_length"] == {"batches": 10}
    assert stored["scheduling_unit"] is None  # the stored config is not changed


def test_the_trial_config_keeps_what_the_experiment_set():
    stored = parse_experiment_config(
        BASE + "scheduling_unit: 5\nmin_validation_period: 20\n"
        "optimizations: {aggregation_frequency: 4}\n"
        "checkpoint_policy: none\nprofiling: {enabled: true}\n"
    ).model_dump()
    out = determined_trial_config(stored)
    assert out["scheduling_unit"] == 5
    assert out["min_validation_period"] == {"batches": 20}
    assert out["optimizations"]["aggregation_frequency"] == 4 and out["optimizations"]["mixed_precision"] == "O0"
    assert out["checkpoint_policy"] == "none"
    assert out["profiling"] == {"enabled": True, "begin_on_batch": 0, "end_after_batch": None, "sync_timings": True}
    assert out["reproducibility"]["experiment_seed"] == 0  # none given: an int, as det.ExperimentConfig needs


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ("optimizations: {aggregation_frequency: 2, gradient_compresion: true}\n", "optimizations.gradient_compresion"),
        ("optimizations: {mixed_precision: O9}\n", "optimizations.mixed_precision"),
        ("checkpoint_policy: sometimes\n", "checkpoint_policy"),
    ],
)
def test_a_bad_trial_api_key_is_refused_naming_it(extra, field):
    with pytest.raises(ConfigError) as err:
        parse_experiment_config(BASE + extra)
    assert field in [p["field"] for p in err.value.fields]


@pytest.mark.parametrize("where", ["searcher.max_length", "min_validation_period", "min_checkpoint_period"])
def test_a_trial_class_length_in_epochs_needs_records_per_epoch(where):
    if where == "searcher.max_length":
        text = "entrypoint: model_def:MyTrial\nsearcher: {name: single, metric: loss, max_length: {epochs: 2}}\n"
    else:
        text = BASE + f"{where}: {{epochs: 1}}\n"
    with pytest.raises(ConfigError) as err:
        parse_experiment_config(text)
    assert [p["field"] for p in err.value.fields] == [where]
    assert "records_per_epoch" in err.value.fields[0]["message"]
    parse_experiment_config(text + "records_per_epoch: 6000\n")  # with it: accepted
    # a script counts its own epochs (the Trainer from the data loader's length): no records_per_epoch needed
    parse_experiment_config(text.replace("model_def:MyTrial", "python3 train.py"))


# The load check run as a task runs it, against a fake determined package (and a fake Keras 3 and
# DeepSpeed API) on PYTHONPATH: its messages for a TensorFlow Determined 0.38.1 cannot use and for a
# DeepSpeedTrial without GPUs, and a launch (the fake launcher prints its argv) where nothing is wrong.
FAKE_TREE = {
    "determined/__init__.py": "class LegacyTrial:\n    pass\n",
    # as determined/keras/_tf_keras_trial.py (0.38.1) does: Keras 3 has no keras.src.saving.legacy
    "determined/keras/__init__.py": "from keras.src.saving.legacy import hdf5_format\n",
    "determined/pytorch/__init__.py": "from determined import LegacyTrial\n"
    "class PyTorchTrial(LegacyTrial):\n    pass\n",
    "determined/pytorch/deepspeed/__init__.py": "from determined import LegacyTrial\n"
    "class DeepSpeedTrial(LegacyTrial):\n    pass\n",
    "determined/launch/__init__.py": "",
    "determined/launch/torch_distributed.py": "import sys\nprint('launched', *sys.argv[1:])\n",
    "keras/__init__.py": "",
    "keras/src/__init__.py": "",
    "keras/src/saving/__init__.py": "",
    "tensorflow_cpu-2.16.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tensorflow-cpu\nVersion: 2.16.1\n",
    "keras-3.3.3.dist-info/METADATA": "Metadata-Version: 2.1\nName: keras\nVersion: 3.3.3\n",
}
MODELS = {
    "keras_trial.py": "from determined import keras\nclass RegressionTrial(keras.TFKerasTrial):\n    pass\n",
    "own_keras.py": "import keras.src.engine\n",
    "ds_trial.py": "from determined.pytorch import deepspeed\n"
    "class RegressionTrial(deepspeed.DeepSpeedTrial):\n    pass\n",
    "pt_trial.py": "from determined import pytorch\nclass RegressionTrial(pytorch.PyTorchTrial):\n    pass\n",
}


# a Keras 2 that imports, a harness that prints its argv, and the cluster info of PEDL_FAKE_SLOTS slots on
# PEDL_FAKE_NODES nodes: for a TFKerasTrial in an environment without torch
KERAS_2_TREE = {
    "determined/__init__.py": "import os, types\nclass LegacyTrial:\n    pass\n"
    "def get_cluster_info():\n"
    "    slots = int(os.environ['PEDL_FAKE_SLOTS'])\n"
    "    nodes = int(os.environ['PEDL_FAKE_NODES'])\n"
    "    return types.SimpleNamespace(slot_ids=list(range(slots)), "
    "container_addrs=['10.0.0.1'] * nodes)\n",
    "determined/keras/__init__.py": "from determined import LegacyTrial\nclass TFKerasTrial(LegacyTrial):\n    pass\n",
    "determined/exec/__init__.py": "",
    "determined/exec/harness.py": "import sys\nprint('harness', *sys.argv[1:])\n",
}
SYSTEM_PYTHON = Path("/usr/bin/python3.11")


def run_load_check(
    tmp_path, entrypoint: str, *, python: Path = Path(sys.executable), tree: dict | None = None, **env: str
):
    if Path("/run/determined/info/resources.json").exists():
        pytest.skip("this host has a task's resources.json, which the load check reads before CUDA_VISIBLE_DEVICES")
    for name, text in {
        **{f"fake/{k}": v for k, v in {**FAKE_TREE, **(tree or {})}.items()},
        **{f"model/{k}": v for k, v in MODELS.items()},
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    base = {k: v for k, v in os.environ.items() if k not in ("CUDA_VISIBLE_DEVICES", "PYTHONPATH")}
    argv = task_entrypoint(entrypoint)
    return subprocess.run(
        [str(python), *argv[1:]],
        cwd=tmp_path / "model",
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "PYTHONPATH": str(tmp_path / "fake"), "PATH": f"{python.parent}:/usr/bin:/bin", **env},
    )


def python_without_torch() -> Path:
    if (
        not SYSTEM_PYTHON.exists()
        or subprocess.run([SYSTEM_PYTHON, "-c", "import torch"], capture_output=True).returncode == 0
    ):
        pytest.skip(f"{SYSTEM_PYTHON}, a python3 without torch, is not here")
    return SYSTEM_PYTHON


def test_a_one_slot_tfkeras_trial_without_torch_runs_in_determineds_harness_alone(tmp_path):
    proc = run_load_check(
        tmp_path,
        "keras_trial:RegressionTrial",
        python=python_without_torch(),
        tree=KERAS_2_TREE,
        PEDL_FAKE_SLOTS="1",
        PEDL_FAKE_NODES="1",
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "harness keras_trial:RegressionTrial"


@pytest.mark.parametrize(("slots", "nodes"), [("2", "1"), ("2", "2")])
def test_a_tfkeras_trial_on_several_slots_without_torch_is_refused(tmp_path, slots, nodes):
    proc = run_load_check(
        tmp_path,
        "keras_trial:RegressionTrial",
        python=python_without_torch(),
        tree=KERAS_2_TREE,
        PEDL_FAKE_SLOTS=slots,
        PEDL_FAKE_NODES=nodes,
    )
    assert proc.returncode == UNLOADABLE_TRIAL_EXIT, proc.stdout + proc.stderr
    assert f"RegressionTrial is a TFKerasTrial on {slots} slot(s) of {nodes} node(s)" in proc.stderr
    assert "has no torch" in proc.stderr and "harness" not in proc.stdout


def test_a_tfkeras_trial_beside_torch_goes_through_determineds_launcher(tmp_path):
    if importlib.util.find_spec("torch") is None:
        pytest.skip(f"{sys.executable} has no torch (make install-torch)")
    proc = run_load_check(
        tmp_path, "keras_trial:RegressionTrial", tree=KERAS_2_TREE, PEDL_FAKE_SLOTS="1", PEDL_FAKE_NODES="1"
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "launched -- --trial keras_trial:RegressionTrial"


def test_the_load_check_names_the_tensorflow_determineds_keras_support_needs(tmp_path):
    proc = run_load_check(tmp_path, "keras_trial:RegressionTrial")
    assert proc.returncode == UNLOADABLE_TRIAL_EXIT, proc.stderr
    assert "Determined 0.38.1's Keras support" in proc.stderr
    assert "needs tensorflow 2.13 to 2.15 (Keras 2)" in proc.stderr
    assert "has tensorflow 2.16.1 and keras 3.3.3" in proc.stderr
    assert "No module named 'keras.src.saving.legacy'" in proc.stderr


def test_the_load_check_leaves_a_keras_import_of_the_users_own_to_the_plain_message(tmp_path):
    proc = run_load_check(tmp_path, "own_keras:RegressionTrial")
    assert proc.returncode == UNLOADABLE_TRIAL_EXIT
    assert "importing own_keras failed (no module named keras.src.engine)" in proc.stderr
    assert "tensorflow 2.13 to 2.15" not in proc.stderr


def test_the_load_check_refuses_a_deepspeed_trial_without_gpus(tmp_path):
    proc = run_load_check(tmp_path, "ds_trial:RegressionTrial")
    assert proc.returncode == UNLOADABLE_TRIAL_EXIT, proc.stdout + proc.stderr
    assert "RegressionTrial is a DeepSpeedTrial, which needs GPU slots" in proc.stderr
    assert "'GPUs required for DeepSpeedTrial.'" in proc.stderr
    assert "launched" not in proc.stdout


@pytest.mark.parametrize(
    ("entrypoint", "env"),
    [
        ("ds_trial:RegressionTrial", {"CUDA_VISIBLE_DEVICES": "0"}),
        ("pt_trial:RegressionTrial", {}),  # a PyTorchTrial runs on CPU slots
    ],
)
def test_the_load_check_launches_a_trial_that_can_run(tmp_path, entrypoint, env):
    proc = run_load_check(tmp_path, entrypoint, **env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"launched -- --trial {entrypoint}"
