"""Determined 0.38.1's Trial APIs, unmodified, on pedl as processes: a PyTorchTrial through the legacy
entrypoint (`model_def:RegressionTrial`, run by Determined's launcher and harness) and through the Trainer
API from a script, with the real `det` CLI. The trial class is tests/e2e/models/det_pytorch, written for
these tests. The det venv (determined, torch, torchvision) is the task environment."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest
import yaml

from pedl.common.mount_namespace import probe, wrap
from pedl.devcluster import LocalAgent, agent_connected, wait_experiment, wait_for
from tests.compat.conftest import det_venv
from tests.compat.test_determined_core_api import REPO, _keep_visible, det, det_config, training_steps
from tests.e2e.conftest import MODELS, Cluster
from tests.support.shared_dirs import make_enterable_dir

pytestmark = [pytest.mark.compat, pytest.mark.e2e]
MODEL = MODELS / "det_pytorch"
ENDED = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


def _needs_task_info() -> None:
    problem = probe()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"process tasks cannot get /run/determined/info here ({problem}); CI runs as root")
        pytest.skip(f"process tasks cannot get /run/determined/info here: {problem}")


@pytest.fixture(scope="module")
def pt_cluster(tmp_path_factory):
    _needs_task_info()
    c = Cluster(tmp_path_factory.mktemp("det-pytorch"), None).start()
    c.markers = make_enterable_dir("pt-markers")  # where a trial notes that it already failed once
    c.markers.chmod(0o1777)  # its tasks run as their user's own uid
    c.add_agent("pt-a", slots=1)
    c.add_agent("pt-b", slots=1)
    yield c
    c.stop()


def pt_config(c: Cluster, name: str, *, batches: int = 8, searcher: dict | None = None, **hparams) -> dict:
    cfg = det_config(
        name, searcher=searcher or {"name": "single", "metric": "validation_loss", "max_length": {"batches": batches}}
    )
    cfg["entrypoint"] = "model_def:RegressionTrial"
    cfg["hyperparameters"] = {"global_batch_size": 8, "lr": 0.1, **hparams}
    cfg["min_validation_period"] = {"batches": 4}
    cfg["scheduling_unit"] = 2  # a training report every 2 batches
    markers = getattr(c, "markers", None)
    cfg["environment"]["environment_variables"] += [
        f"PEDL_TEST_MARKERS={markers or '/nonexistent'}",
        "OMP_NUM_THREADS=1",
    ]
    image = getattr(c, "image", None)
    if image:  # in a container: the image's own python3 and PATH, and the markers' directory at its own path
        own = [v for v in cfg["environment"]["environment_variables"] if not v.startswith("PATH=")]
        cfg["environment"] = {"image": image, "environment_variables": own}
        if markers:
            cfg["bind_mounts"] = [{"host_path": str(markers), "container_path": str(markers)}]
    return cfg


def run(c: Cluster, cfg: dict, timeout: float = 240) -> tuple[dict, list[dict]]:
    exp_id = c.create(cfg, MODEL)
    exp = wait_experiment(c.master, exp_id, ENDED, timeout=timeout)
    return exp, c.trials(exp_id)


def validation_steps(c: Cluster, trial_id: int) -> list[int]:
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="validation")["metrics"]
    return [m["stepsCompleted"] for m in metrics]


def test_a_pytorch_trial_grid_completes_with_metrics_checkpoints_and_a_searcher_metric(pt_cluster, tmp_path):
    c = pt_cluster
    grid = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 8}}
    cfg = pt_config(c, "pt-grid", searcher=grid)
    cfg["hyperparameters"]["lr"] = {"type": "categorical", "vals": [0.05, 0.2]}
    exp, trials = run(c, cfg)
    assert exp["state"] == "STATE_COMPLETED", [c.logs(t["id"]) for t in trials]
    assert len(trials) == 2
    for trial in trials:
        assert training_steps(c, trial["id"]) == [2, 4, 6, 8]
        assert validation_steps(c, trial["id"]) == [4, 8]
        losses = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
        assert losses[-1]["metrics"]["loss"] < losses[0]["metrics"]["loss"]  # it trained
        described = c.master.api("GET", f"/api/v1/trials/{trial['id']}")["trial"]
        best = min(
            m["metrics"]["validation_loss"]
            for m in c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="validation")["metrics"]
        )
        assert described["searcherMetricValue"] == pytest.approx(best)
        assert described["bestValidation"]["metrics"]["avgMetrics"]["validation_loss"] == pytest.approx(best)
        logs = c.logs(trial["id"])
        assert "Creating _PyTorchTrialController with RegressionTrial" in logs  # Determined's own harness ran it
    # the checkpoint GC that follows the experiment may delete all but the best and latest of each trial
    kept = [
        ck
        for ck in c.master.api("GET", f"/api/v1/trials/{trials[0]['id']}/checkpoints")["checkpoints"]
        if ck["state"] == "STATE_COMPLETED"
    ]
    assert kept, "no checkpoint"
    out = tmp_path / "ckpt"
    det(c, "checkpoint", "download", kept[-1]["uuid"], "--output-dir", str(out))
    assert (out / "state_dict.pth").is_file()
    assert (out / "code" / "model_def.py").is_file()  # the clean copy of the model definition


def test_a_pytorch_trial_pauses_at_a_checkpoint_and_resumes_without_repeating_a_batch(pt_cluster):
    c = pt_cluster
    cfg = pt_config(c, "pt-pause", batches=40, delay=0.15)
    exp_id = c.create(cfg, MODEL)
    wait_for(
        lambda: c.trials(exp_id) and 8 in training_steps(c, c.trials(exp_id)[0]["id"]), 120, what="8 batches trained"
    )
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: c.trials(exp_id)[0]["state"] == "STATE_PAUSED", 90, what="the trial paused")
    (trial,) = c.trials(exp_id)
    paused_at = training_steps(c, trial["id"])[-1]
    assert paused_at < 40
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/activate")
    exp = wait_experiment(c.master, exp_id, ENDED, timeout=240)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    assert training_steps(c, trial["id"]) == list(range(2, 41, 2))  # none lost, none twice
    runs = {
        m["trialRunId"]
        for m in c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    }
    assert len(runs) == 2  # the second run took over from the checkpoint


def test_a_killed_pytorch_trial_restarts_on_another_agent_from_its_checkpoint(pt_cluster):
    c = pt_cluster
    cfg = pt_config(c, "pt-restart", batches=16, fail_once_at=10, delay=0.3)
    cfg["max_restarts"] = 1
    exp_id = c.create(cfg, MODEL)
    wait_for(lambda: c.trials(exp_id) and c.trials(exp_id)[0]["state"] == "STATE_RUNNING", 60, what="running")
    wait_for(lambda: _agents_of(c, c.trials(exp_id)[0]["id"]), 60, what="its first log line")
    (first,) = _agents_of(c, c.trials(exp_id)[0]["id"])
    # the agent it runs on takes no new work: its restart must go to the other
    as_admin(c, "POST", f"/api/v1/agents/{first}/disable", {"drain": True})
    try:
        exp = wait_experiment(c.master, exp_id, ENDED, timeout=240)
    finally:
        as_admin(c, "POST", f"/api/v1/agents/{first}/enable", {})
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert trial["restarts"] == 1
    assert _agents_of(c, trial["id"]) == [first, next(a for a in c.agents if a != first)]
    steps = training_steps(c, trial["id"])
    assert steps == sorted(set(steps)) and steps[-1] == 16  # resumed from batch 8's checkpoint: nothing twice


def as_admin(c: Cluster, method: str, path: str, body: dict) -> None:
    login = httpx.post(f"{c.master.url}/api/v1/auth/login", json={"username": "admin", "password": ""}, timeout=30)
    r = httpx.request(
        method,
        f"{c.master.url}{path}",
        json=body,
        timeout=30,
        headers={"Authorization": f"Bearer {login.json()['token']}"},
    )
    assert r.status_code == 200, r.text


def _agents_of(c: Cluster, trial_id: int) -> list[str]:
    """The agents the trial's task logged from, in the order it first did."""
    text = c.master.api("GET", f"/api/v1/trials/{trial_id}/logs", follow="false")
    agents = [json.loads(line)["result"].get("agentId") for line in text.splitlines() if line]
    return list(dict.fromkeys(a for a in agents if a))


def test_the_trainer_api_trains_a_pytorch_trial_from_a_script(pt_cluster):
    c = pt_cluster
    cfg = pt_config(c, "pt-trainer", batches=8)
    cfg["entrypoint"] = "python3 trainer.py"
    cfg["hyperparameters"]["batches"] = 8
    exp, (trial,) = run(c, cfg)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    assert validation_steps(c, trial["id"]) == [4, 8]
    assert c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]


def test_invalid_hp_ends_a_pytorch_trial_early_and_the_experiment_goes_on(pt_cluster):
    c = pt_cluster
    grid = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 8}}
    cfg = pt_config(c, "pt-invalid-hp", searcher=grid)
    cfg["hyperparameters"]["invalid_hp_at"] = {"type": "categorical", "vals": [3, -1]}
    exp, trials = run(c, cfg)
    assert exp["state"] == "STATE_COMPLETED", [c.logs(t["id"]) for t in trials]
    by_hp = {t["hparams"]["invalid_hp_at"]: t for t in trials}
    invalid, valid = by_hp[3], by_hp[-1]
    assert training_steps(c, valid["id"])[-1] == 8
    assert not any(step > 4 for step in training_steps(c, invalid["id"]))
    assert invalid["state"] != "STATE_ERROR" and invalid["restarts"] == 0
    assert "InvalidHP" in c.logs(invalid["id"]) or "invalid" in c.logs(invalid["id"]).lower()


def test_test_mode_trains_a_pytorch_trial_for_one_batch(pt_cluster, tmp_path):
    c = pt_cluster
    cfg = pt_config(c, "pt-test-mode", batches=50)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    out = det(c, "experiment", "create", "--test", str(tmp_path / "config.yaml"), str(MODEL))
    assert "Model definition test succeeded" in out, out


@pytest.mark.parametrize(
    ("entrypoint", "says"),
    [
        ("no_such_module:RegressionTrial", "the model definition has no module no_such_module"),
        ("model_def:NoSuchTrial", "module model_def has no attribute NoSuchTrial"),
        ("model_def:NotATrial", "NotATrial is not a Trial class"),
    ],
)
def test_a_trial_class_that_cannot_be_loaded_fails_at_once_naming_the_problem(pt_cluster, entrypoint, says):
    c = pt_cluster
    cfg = pt_config(c, "pt-bad-class")
    cfg["entrypoint"] = entrypoint
    cfg["max_restarts"] = 3
    exp, (trial,) = run(c, cfg, timeout=120)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_ERROR"
    assert says in logs, logs
    assert trial["restarts"] == 0  # each restart would fail alike
    assert "not found" not in logs and "exit code 127" not in logs


def test_a_trial_class_without_determined_in_the_task_environment_names_the_package(pt_cluster):
    c = pt_cluster
    cfg = pt_config(c, "pt-no-determined")
    cfg["environment"]["environment_variables"] = ["PATH=/usr/bin:/bin"]  # Debian's python3: no determined
    exp, (trial,) = run(c, cfg, timeout=120)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_ERROR" and trial["state"] == "STATE_ERROR"
    assert "determined package (determined==0.38.1) is not installed" in logs, logs
    assert "model_def:RegressionTrial" in logs


def test_a_deepspeed_trial_on_cpu_slots_is_refused_naming_the_gpus_it_needs(pt_cluster):
    """DeepSpeed imports and builds its engine on CPU, but Determined 0.38.1's DeepSpeedTrialContext refuses
    a trial without GPUs: the trial ends at once with that reason, and is not restarted."""
    c = pt_cluster
    if not (det_venv() / "lib" / "python3.11" / "site-packages" / "deepspeed").is_dir():
        missing = f"deepspeed is not installed in {det_venv()}: make det-venv"
        pytest.fail(missing) if os.environ.get("CI") else pytest.skip(missing)
    cfg = pt_config(c, "ds-on-cpu")
    cfg["max_restarts"] = 2
    exp_id = c.create(cfg, MODELS / "det_deepspeed")
    exp = wait_experiment(c.master, exp_id, ENDED, timeout=180)
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_ERROR", logs
    assert "RegressionTrial is a DeepSpeedTrial, which needs GPU slots" in logs, logs
    assert "'GPUs required for DeepSpeedTrial.'" in logs
    assert trial["restarts"] == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"searcher": {"name": "single", "metric": "validation_loss", "max_length": {"epochs": 2}}},
            "searcher.max_length",
        ),
        (
            {"optimizations": {"aggregation_frequency": 2, "gradient_compresion": True}},
            "optimizations.gradient_compresion",
        ),
    ],
)
def test_a_bad_trial_api_config_is_refused_at_submission_naming_the_field(pt_cluster, tmp_path, change, field):
    c = pt_cluster
    cfg = {**pt_config(c, "pt-bad-config"), **change}
    before = c.master.api("GET", "/api/v1/experiments")["pagination"]["total"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "PEDL_"))}
    env["DET_DEBUG_CONFIG_PATH"] = str(c.work / "det-config")
    proc = subprocess.run(
        [
            str(det_venv() / "bin" / "det"),
            "-m",
            c.master.url,
            "experiment",
            "create",
            str(tmp_path / "config.yaml"),
            str(MODEL),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode != 0
    assert field in proc.stdout + proc.stderr, proc.stdout + proc.stderr
    assert c.master.api("GET", "/api/v1/experiments")["pagination"]["total"] == before  # nothing stored


def test_a_two_slot_pytorch_trial_on_one_agent_averages_its_ranks_metrics():
    _needs_task_info()
    work = Path(tempfile.mkdtemp(prefix="pedl-pt-2slot-", dir="/var/tmp"))
    c = Cluster(work, None).start()
    try:
        c.add_agent("pt-two", slots=2)
        cfg = pt_config(c, "pt-2slot", batches=8)
        cfg["resources"] = {"slots_per_trial": 2}
        exp, (trial,) = run(c, cfg, timeout=300)
        logs = c.logs(trial["id"])
        assert exp["state"] == "STATE_COMPLETED", logs
        _assert_distributed(c, trial, logs, world=2)
    finally:
        c.stop()


def test_a_pytorch_trial_trains_across_two_agents_of_one_slot():
    _needs_task_info()
    work = Path(tempfile.mkdtemp(prefix="pedl-pt-2agents-", dir="/var/tmp"))
    c = Cluster(work, None).start()
    try:
        for name in ("pt-node-a", "pt-node-b"):  # each with a /tmp of its own, as separate hosts have
            own_tmp = work / f"{name}-tmp"
            own_tmp.mkdir()
            own_tmp.chmod(0o1777)
            agent = LocalAgent(work, c.master.url, name, slots=1, token=c.master.agent_token)
            agent.argv = wrap(
                agent.argv,
                [*_keep_visible(REPO, own_tmp), *_keep_visible(c.ckpts.parent, own_tmp), (str(own_tmp), "/tmp", False)],
            )
            agent.start()
            c.agents[name] = agent
            wait_for(lambda n=name: agent_connected(c.master, n), 60, what=f"agent {name}")
        cfg = pt_config(c, "pt-2agents", batches=8)
        cfg["resources"] = {"slots_per_trial": 2}
        exp, (trial,) = run(c, cfg, timeout=300)
        logs = c.logs(trial["id"])
        assert exp["state"] == "STATE_COMPLETED", logs
        _assert_distributed(c, trial, logs, world=2)
    finally:
        c.stop()


def _assert_distributed(c: Cluster, trial: dict, logs: str, world: int) -> None:
    for rank in range(world):
        assert f"[rank={rank}]" in logs
    metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in metrics] == [2, 4, 6, 8]  # one report per step, the chief's
    # each rank trains on its own half of each batch; the report averages the ranks' metrics (ranks 0 and 1)
    assert [m["metrics"]["rank"] for m in metrics] == [0.5] * 4
    kept = c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
    assert kept and all("state_dict.pth" in ck["resources"] for ck in kept)  # the chief alone wrote them


def test_local_test_mode_trains_a_pytorch_trial_without_the_cluster(pt_cluster, tmp_path):
    c = pt_cluster
    cfg = pt_config(c, "pt-local-test", batches=50)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    before = c.master.api("GET", "/api/v1/experiments")["pagination"]["total"]
    det(c, "experiment", "create", "--local", "--test", str(tmp_path / "config.yaml"), str(MODEL))
    assert c.master.api("GET", "/api/v1/experiments")["pagination"]["total"] == before  # all on the client
