"""The real det CLI (0.38.1) runs TensorBoards on a pedl cluster (a master and a local agent, real processes,
TensorBoard from PyPI): det tensorboard start waits until it is ready and prints where it is, -d prints its
id; det tensorboard list shows it, det tensorboard kill ends it; an experiment that is not there is refused."""

from __future__ import annotations

import httpx
import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.compat.test_det_cli import DET, det, ended
from tests.e2e.conftest import MODELS, Cluster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]

CONFIG = {
    "name": "tb-reports",
    "entrypoint": "python3 train.py",
    "max_restarts": 0,
    "hyperparameters": {"steps": 3},
    "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": 3}},
    "resources": {"slots_per_trial": 1},
}


@pytest.fixture(scope="module")
def tb_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    c = Cluster(tmp_path_factory.mktemp("det-tensorboards"), None).start()
    c.add_agent("tb-agent-1", slots=1)
    exp_id = c.create(CONFIG, MODELS / "fast_reports")
    wait_experiment(c.master, exp_id, {"STATE_COMPLETED"})
    c.exp_id = exp_id  # type: ignore[attr-defined]
    yield c
    c.stop()


def test_det_tensorboard_start_detached_list_and_kill(tb_cluster) -> None:
    c = tb_cluster
    tb_id = det(c, "tensorboard", "start", "-d", str(c.exp_id)).stdout.strip()
    shown = c.master.api("GET", f"/api/v1/tensorboards/{tb_id}")["tensorboard"]
    assert shown["experimentIds"] == [c.exp_id] and shown["description"] == f"TensorBoard (Experiment {c.exp_id})"
    assert tb_id in det(c, "tensorboard", "list", "-q").stdout.split()
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/tasks/{tb_id}")["task"]["allocations"][0]["isReady"],
        120,
        interval=0.5,
        what="the TensorBoard to be ready",
    )
    listed = det(c, "tensorboard", "list").stdout
    assert tb_id in listed and "RUNNING" in listed.upper(), listed
    det(c, "tensorboard", "kill", tb_id)
    wait_for(lambda: ended(c, "tensorboards", tb_id), 60, what="the TensorBoard to end")
    assert c.master.api("GET", f"/api/v1/tensorboards/{tb_id}")["tensorboard"]["state"] == "STATE_TERMINATED"


def test_det_tensorboard_start_waits_until_it_is_ready(tb_cluster) -> None:
    c = tb_cluster
    trial_id = c.trials(c.exp_id)[0]["id"]
    out = det(c, "tensorboard", "start", "-t", str(trial_id), "--no-browser").stdout
    line = next((x for x in out.splitlines() if "Tensorboard is running at:" in x), None)
    assert line is not None, out
    url = line.split("Tensorboard is running at:", 1)[1].strip()
    [tb_id] = [t for t in det(c, "tensorboard", "list", "-q").stdout.split() if t in url]
    assert url.startswith(c.master.url) and tb_id in url, url  # Determined's WebUI page for it
    r = httpx.get(
        f"{c.master.url}/proxy/{tb_id}/data/plugin/scalars/tags",
        headers={"Authorization": f"Bearer {c.master.token()}"},
    )
    assert r.status_code == 200, r.text
    det(c, "tensorboard", "kill", tb_id)
    wait_for(lambda: ended(c, "tensorboards", tb_id), 60, what="the TensorBoard to end")


def test_det_tensorboard_start_of_an_unknown_experiment_is_refused(tb_cluster) -> None:
    proc = det(tb_cluster, "tensorboard", "start", "-d", "99999", check=False)
    assert proc.returncode != 0 and "99999" in proc.stdout + proc.stderr, proc
