"""The examples as real processes: off-cluster (printing, ./checkpoints, resume) and against a fake
master (metrics, checkpoints, searcher completion, preemption and resume)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .fake_master import TOKEN, FakeMaster, task_env

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(model_dir: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """Run train.py in `model_dir` the way the agent does (cwd = the unpacked model directory)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("DET_")}
    proc = subprocess.run(
        [sys.executable, "train.py", *args],
        cwd=model_dir,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc.stdout


def copy_example(name: str, tmp_path: Path) -> Path:
    dest = tmp_path / name
    shutil.copytree(EXAMPLES / name, dest, ignore=shutil.ignore_patterns("checkpoints", "__pycache__"))
    return dest


def stored_checkpoints(out: str) -> dict[int, str]:
    """steps_completed -> uuid from the local '[pedl] checkpoint ...' lines."""
    found = re.findall(r"\[pedl\] checkpoint (\S+) stored at \S+ \(steps_completed=(\d+)\)", out)
    return {int(steps): uuid for uuid, steps in found}


def searcher_metric(out: str) -> str:
    return re.search(r"searcher operation completed: length=\d+ searcher_metric=(\S+)", out).group(1)


# -- off-cluster ---------------------------------------------------------------------------------


def test_numpy_mlp_off_cluster_trains_checkpoints_and_resumes(tmp_path: Path) -> None:
    model_dir = copy_example("numpy_mlp", tmp_path)
    out = run_example(model_dir)
    assert "[pedl] training metrics: steps_completed=50 loss=" in out
    assert re.search(r"validation metrics: steps_completed=1000 validation_loss=\S+ validation_accuracy=", out)
    checkpoints = stored_checkpoints(out)
    assert sorted(checkpoints) == [500, 1000]
    for steps, uuid in checkpoints.items():
        ckpt = model_dir / "checkpoints" / uuid
        assert {p.name for p in ckpt.iterdir()} == {"weights.npz", "state.json", "metadata.json"}
        assert json.loads((ckpt / "metadata.json").read_text()) == {"steps_completed": steps}
    final_accuracy = float(re.findall(r"validation_accuracy=(\S+)", out)[-1])
    assert final_accuracy > 0.9  # it really learns the spirals

    resumed = run_example(model_dir, "--latest-checkpoint", checkpoints[500])
    assert f"resumed from checkpoint {checkpoints[500]} at batch 500" in resumed
    first_report = re.search(r"training metrics: steps_completed=(\d+)", resumed).group(1)
    assert first_report == "550"
    # Weights, momentum and the batch order all come back, so the result is the same.
    assert searcher_metric(resumed) == searcher_metric(out)


def test_numpy_mlp_off_cluster_with_the_grid_config(tmp_path: Path) -> None:
    model_dir = copy_example("numpy_mlp", tmp_path)
    out = run_example(model_dir, "--config", "grid.yaml", "--checkpoint-dir", str(tmp_path / "ck"))
    assert "searcher operation completed: length=1000" in out
    assert len(list((tmp_path / "ck").iterdir())) == 2


SMALL_TORCH_CONFIG = """
name: torch-small
entrypoint: python3 train.py
hyperparameters: {learning_rate: 0.01, batch_size: 32, hidden_size: 16}
searcher: {name: single, metric: validation_loss, max_length: {batches: 100}}
min_validation_period: {batches: 50}
min_checkpoint_period: {batches: 50}
"""


@pytest.mark.slow
def test_torch_mlp_off_cluster_trains_and_resumes(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    model_dir = copy_example("torch_mlp", tmp_path)
    (model_dir / "small.yaml").write_text(SMALL_TORCH_CONFIG)
    out = run_example(model_dir, "--config", "small.yaml")
    assert "[pedl] training metrics: steps_completed=50 loss=" in out
    checkpoints = stored_checkpoints(out)
    assert sorted(checkpoints) == [50, 100]
    assert (model_dir / "checkpoints" / checkpoints[100] / "state.pt").exists()
    resumed = run_example(model_dir, "--config", "small.yaml", "--latest-checkpoint", checkpoints[50])
    assert f"resumed from checkpoint {checkpoints[50]} at batch 50" in resumed
    assert searcher_metric(resumed) == searcher_metric(out)


# -- against a (fake) master ---------------------------------------------------------------------


def test_numpy_mlp_on_cluster_reports_everything(fake_master: FakeMaster, tmp_path: Path) -> None:
    model_dir = copy_example("numpy_mlp", tmp_path)
    host_path = tmp_path / "shared"
    run_example(model_dir, env=task_env(fake_master.url, host_path, max_length=60))

    assert all(r.headers.get("authorization") == f"Bearer {TOKEN}" for r in fake_master.requests)
    metrics = fake_master.metric_reports()
    training = [m["metrics"]["stepsCompleted"] for m in metrics if m["group"] == "training"]
    validation = [m for m in metrics if m["group"] == "validation"]
    assert training == [50, 60]
    assert [m["metrics"]["stepsCompleted"] for m in validation] == [10, 20, 30, 40, 50, 60]
    assert set(validation[0]["metrics"]["metrics"]["avgMetrics"]) == {"validation_loss", "validation_accuracy"}

    checkpoints = [c.body["checkpoint"] for c in fake_master.calls("POST", "/api/v1/checkpoints")]
    assert [c["metadata"]["steps_completed"] for c in checkpoints] == [20, 40, 60]
    for ckpt in checkpoints:
        assert set(ckpt["resources"]) == {"weights.npz", "state.json", "metadata.json"}
        assert (host_path / "exp" / ckpt["uuid"] / "weights.npz").stat().st_size == int(
            ckpt["resources"]["weights.npz"]
        )

    [completed] = fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation")
    assert completed.body["op"] == {"length": 60}
    assert completed.body["searcherMetric"] == validation[-1]["metrics"]["metrics"]["avgMetrics"]["validation_loss"]
    assert fake_master.calls("POST", r"/api/v1/allocations/.*/ack_preemption") == []


def test_numpy_mlp_on_cluster_preempted_then_resumed(fake_master: FakeMaster, tmp_path: Path) -> None:
    model_dir = copy_example("numpy_mlp", tmp_path)
    host_path = tmp_path / "shared"
    fake_master.preempt()
    out = run_example(model_dir, env=task_env(fake_master.url, host_path, max_length=60))
    assert "preempted at batch 1; checkpoint saved, exiting" in out
    assert len(fake_master.calls("POST", "/api/v1/allocations/3.1.0/signals/ack_preemption")) == 1
    [checkpoint] = [c.body["checkpoint"] for c in fake_master.calls("POST", "/api/v1/checkpoints")]
    assert checkpoint["metadata"] == {"steps_completed": 1}
    assert fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation") == []

    # The master starts the trial again from its latest checkpoint, without preempting this time.
    second = FakeMaster().start()
    try:
        second.checkpoints = dict(fake_master.checkpoints)
        out = run_example(
            model_dir, env=task_env(second.url, host_path, max_length=60, latest_checkpoint=checkpoint["uuid"])
        )
        assert f"resumed from checkpoint {checkpoint['uuid']} at batch 1" in out
        assert second.calls("GET", f"/api/v1/checkpoints/{checkpoint['uuid']}")
        steps = [r["metrics"]["stepsCompleted"] for r in second.metric_reports()]
        assert steps[0] == 10 and steps[-1] == 60
        assert len(second.calls("POST", "/api/v1/trials/3/searcher/completed_operation")) == 1
    finally:
        second.stop()


def test_numpy_mlp_on_cluster_waits_out_a_master_that_answers_503(fake_master: FakeMaster, tmp_path: Path) -> None:
    model_dir = copy_example("numpy_mlp", tmp_path)
    fake_master.fail("POST", "/api/v1/trials/3/metrics", 503, 503)
    fake_master.fail("POST", "/api/v1/checkpoints", 502)
    run_example(model_dir, env=task_env(fake_master.url, tmp_path / "shared", max_length=20))
    steps = [r["metrics"]["stepsCompleted"] for r in fake_master.metric_reports()]
    assert steps == [10, 20, 20]  # validation 10, training 20, validation 20: all delivered, in order
    assert len(fake_master.calls("POST", "/api/v1/checkpoints")) == 1


def test_torch_mlp_on_cluster(fake_master: FakeMaster, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    model_dir = copy_example("torch_mlp", tmp_path)
    run_example(
        model_dir,
        env=task_env(
            fake_master.url, tmp_path / "shared", max_length=40, hparams={"learning_rate": 0.01, "hidden_size": 16}
        ),
    )
    checkpoints = [c.body["checkpoint"] for c in fake_master.calls("POST", "/api/v1/checkpoints")]
    assert [c["metadata"]["steps_completed"] for c in checkpoints] == [20, 40]
    assert set(checkpoints[-1]["resources"]) == {"state.pt", "metadata.json"}
    assert len(fake_master.calls("POST", "/api/v1/trials/3/searcher/completed_operation")) == 1
