"""Determined 0.38.1's PyTorchTrial, unmodified, in Docker containers as it runs as a process: the offline-built
test image carries torch, torchvision and determined, and each experiment names it (environment.image).

The process tests of test_determined_trial_apis.py run here once more, as they are, against a cluster of two
agents that run their tasks in containers (this module's `pt_cluster`; `pt_config` gives a cluster with an
image the image, and mounts the markers' directory): a grid to COMPLETED with checkpoints `det checkpoint
download` fetches, pause and resume, a killed process restarted on the other agent, the Trainer API,
det.InvalidHP, and test mode. Two slots on one agent and one slot on each of two agents have tests of their
own, with clusters of their own."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.compat.test_determined_trial_apis import (  # noqa: F401 (each runs here too, in containers)
    _assert_distributed,
    pt_config,
    run,
    test_a_killed_pytorch_trial_restarts_on_another_agent_from_its_checkpoint,
    test_a_pytorch_trial_grid_completes_with_metrics_checkpoints_and_a_searcher_metric,
    test_a_pytorch_trial_pauses_at_a_checkpoint_and_resumes_without_repeating_a_batch,
    test_invalid_hp_ends_a_pytorch_trial_early_and_the_experiment_goes_on,
    test_test_mode_trains_a_pytorch_trial_for_one_batch,
    test_the_trainer_api_trains_a_pytorch_trial_from_a_script,
)
from tests.e2e.conftest import Cluster
from tests.support.shared_dirs import make_enterable_dir

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def pt_cluster(docker_daemon: str, test_image: str, tmp_path_factory: pytest.TempPathFactory):
    c = Cluster(tmp_path_factory.mktemp("det-pytorch-containers"), None).start()
    c.image = test_image
    c.markers = make_enterable_dir("pt-container-markers")  # where a trial notes that it already failed once
    c.markers.chmod(0o1777)
    c.add_agent("pt-docker-a", slots=1)
    c.add_agent("pt-docker-b", slots=1)
    yield c
    c.stop()


def test_the_task_image_imports_torch_torchvision_and_determined(test_image: str) -> None:
    script = (
        "import torch, torchvision, determined, determined.pytorch; "
        "print(torch.__version__, torchvision.__version__, determined.__version__)"
    )
    done = subprocess.run(
        ["docker", "run", "--rm", "--network", "none", test_image, "python3", "-c", script],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    torch_version, torchvision_version, det_version = done.stdout.split()
    assert torch_version.endswith("+cpu") and torchvision_version and det_version == "0.38.1"


def test_a_pytorch_trial_runs_in_a_container_of_the_image(pt_cluster):
    c = pt_cluster
    exp, (trial,) = run(c, pt_config(c, "pt-in-a-container"))
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert "running in container pedl-" in logs and f"of image {c.image}" in logs
    assert "Creating _PyTorchTrialController with RegressionTrial" in logs  # Determined's own harness ran it


@pytest.mark.parametrize(("agents", "slots"), [(1, 2), (2, 1)])
def test_a_distributed_pytorch_trial_in_containers(docker_daemon: str, test_image: str, agents: int, slots: int):
    work = Path(tempfile.mkdtemp(prefix="pedl-pt-containers-", dir="/var/tmp"))
    c = Cluster(work, None).start()
    try:
        c.image = test_image
        for i in range(agents):  # the containers use the host's network, as Determined's do by default
            c.add_agent(f"pt-node-{i}", slots=slots)
        cfg = pt_config(c, f"pt-{agents}x{slots}-containers", batches=8)
        cfg["resources"] = {"slots_per_trial": 2}
        exp, (trial,) = run(c, cfg, timeout=300)
        logs = c.logs(trial["id"])
        assert exp["state"] == "STATE_COMPLETED", logs
        assert logs.count("running in container pedl-") == agents
        _assert_distributed(c, trial, logs, world=2)
    finally:
        c.stop()
