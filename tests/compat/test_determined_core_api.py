"""Training scripts on Determined 0.38.1's Core API, unmodified, run on pedl as processes: each task
gets its own /run/determined/info (a mount namespace of its own) and /determined_shared_fs (the
checkpoint storage's host_path). The `determined` package is installed in the task environment:
the experiments put the det venv first on PATH. Results are checked through pedl's API and det."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from pedl.common.mount_namespace import probe, wrap
from pedl.devcluster import LocalAgent, agent_connected, wait_experiment, wait_for
from tests.compat.conftest import det_venv
from tests.e2e import completed_checkpoints
from tests.e2e.conftest import MODELS, Cluster
from tests.support.moto_server import moto_server_fixture  # noqa: F401 - the moto_server fixture

pytestmark = [pytest.mark.compat, pytest.mark.e2e]
DET_MODEL = MODELS / "det_core"


@pytest.fixture(scope="module")
def det_core_cluster(tmp_path_factory):
    problem = probe()
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"process tasks cannot get /run/determined/info here ({problem}); CI runs as root")
        pytest.skip(f"process tasks cannot get /run/determined/info here: {problem}")
    c = Cluster(tmp_path_factory.mktemp("det-core"), None).start()
    c.add_agent("core-agent", slots=2)
    yield c
    c.stop()


def det_config(name: str, *, steps: int = 6, searcher: dict | None = None, **hparams) -> dict:
    venv_bin = det_venv() / "bin"
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"delay": 0.05, "ckpt_every": 3, **hparams},
        "searcher": searcher or {"name": "single", "metric": "validation_loss", "max_length": {"batches": steps}},
        "environment": {"environment_variables": [f"PATH={venv_bin}:/usr/local/bin:/usr/bin:/bin"]},
        "resources": {"slots_per_trial": 1},
    }


def det(c: Cluster, *args: str, env_extra: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "PEDL_"))}
    env.update(env_extra or {})
    env["DET_DEBUG_CONFIG_PATH"] = str(c.work / "det-config")
    proc = subprocess.run(
        [str(det_venv() / "bin" / "det"), "-m", c.master.url, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 0, f"det {' '.join(args)}: {proc.stdout}\n{proc.stderr}"
    return proc.stdout


def state_file(c: Cluster, ck: dict) -> Path:
    return c.work / "ckpts" / ck["uuid"] / "state.json"


def training_steps(c: Cluster, trial_id: int) -> list[int]:
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    return [m["stepsCompleted"] for m in metrics]


def test_two_determined_trials_on_one_agent_report_and_checkpoint_each_in_its_own_info(
    det_core_cluster, tmp_path
) -> None:
    c = det_core_cluster
    grid = {"name": "grid", "metric": "validation_loss", "max_length": {"batches": 6}}
    cfg = det_config("det-core-grid", searcher=grid, delay=0.3)
    cfg["hyperparameters"]["scale"] = {"type": "categorical", "vals": [1.0, 2.0]}
    exp_id = c.create(cfg, DET_MODEL)
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
    trials = c.trials(exp_id)
    assert exp["state"] == "STATE_COMPLETED", [c.logs(t["id"]) for t in trials]
    assert len(trials) == 2
    for trial in trials:
        logs = c.logs(trial["id"])
        # each task saw the four files, and they named its own trial and allocation
        seen = re.search(r"info files (\[.*?\]) trial (\d+) allocation (\S+)", logs)
        assert seen, logs
        assert json.loads(seen.group(1).replace("'", '"')) == [
            "cluster.json",
            "rendezvous.json",
            "resources.json",
            "trial.json",
        ]
        assert int(seen.group(2)) == trial["id"]
        assert training_steps(c, trial["id"]) == [1, 2, 3, 4, 5, 6]
        ckpts = c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        assert {ck["metadata"]["steps_completed"] for ck in ckpts} >= {6}
        # on the storage's host path, where pedl looks (the checkpoint GC may be deleting some meanwhile)
        for ck in completed_checkpoints.with_files(c.master, ckpts, lambda ck: state_file(c, ck).is_file()):
            assert json.loads(state_file(c, ck).read_text())["step"] == ck["metadata"]["steps_completed"]
    # nothing was left on the host's own /run/determined/info
    assert not any(Path("/run/determined/info").iterdir())

    # det sees the same: the experiment's checkpoints and a download of a trial's latest one. The
    # experiment's checkpoint GC may still be deleting the others (the policy keeps each trial's latest),
    # so only the latest is sure to stay downloadable.
    listed = det(c, "experiment", "list-checkpoints", str(exp_id))
    kept = [
        ck
        for ck in c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
        if ck["state"] == "STATE_COMPLETED"
    ]
    assert kept and all(ck["uuid"] in listed for ck in kept)
    latest = max(kept, key=lambda ck: ck["metadata"]["steps_completed"])
    assert latest["metadata"]["steps_completed"] == 6
    out = tmp_path / "download"
    det(c, "checkpoint", "download", latest["uuid"], "--output-dir", str(out))
    assert json.loads((out / "state.json").read_text())["step"] == 6
    described = det(c, "trial", "describe", str(trials[0]["id"]))
    assert "STATE_COMPLETED" in described or "COMPLETED" in described


def test_a_determined_trial_pauses_at_a_checkpoint_and_resumes_from_it(det_core_cluster) -> None:
    c = det_core_cluster
    exp_id = c.create(det_config("det-core-pause", steps=30, delay=0.2), DET_MODEL)
    wait_for(
        lambda: c.trials(exp_id) and "checkpoint" in c.logs(c.trials(exp_id)[0]["id"]), 90, what="the first checkpoint"
    )
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/pause")
    wait_for(lambda: c.trials(exp_id)[0]["state"] == "STATE_PAUSED", 60, what="the trial paused")
    (trial,) = c.trials(exp_id)
    assert "preempted at step" in c.logs(trial["id"])
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/activate")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    logs = c.logs(trial["id"])
    assert "resumed from" in logs
    assert training_steps(c, trial["id"]) == list(range(1, 31))  # none lost, none twice


def test_a_script_that_never_reaches_the_master_completes_and_its_log_says_so(det_core_cluster) -> None:
    c = det_core_cluster
    cfg = det_config("det-core-offcluster")
    cfg["entrypoint"] = "python3 -c \"print('training without the cluster')\""
    exp_id = c.create(cfg, DET_MODEL)
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=120)
    assert exp["state"] == "STATE_COMPLETED"
    (trial,) = c.trials(exp_id)
    assert trial["state"] == "STATE_COMPLETED"
    logs = c.logs(trial["id"])
    assert "training without the cluster" in logs and "without ever calling the master" in logs


REPO = Path(__file__).resolve().parents[2]  # the checkout, its venvs included


def _keep_visible(path: Path, own_tmp: Path) -> list[tuple[str, str, bool]]:
    """A bind that carries `path` into `own_tmp` when it lies under /tmp (a CI checkout may), so it
    stays visible once `own_tmp` covers /tmp."""
    try:
        inside = path.relative_to("/tmp")
    except ValueError:
        return []
    (own_tmp / inside).mkdir(parents=True, exist_ok=True)
    return [(str(path), str(own_tmp / inside), False)]


def test_determined_launcher_trains_across_two_agents() -> None:
    problem = probe()
    if problem is not None:
        pytest.skip(f"process tasks cannot get /run/determined/info here: {problem}")
    # two machines on one host: each agent (and so its tasks) has a /tmp of its own, as separate hosts
    # do; Determined's launcher keeps a socket at /tmp/pid_server-<allocation id> on every node. The
    # cluster lives outside /tmp, which the agents' own /tmp hides.
    work = Path(tempfile.mkdtemp(prefix="pedl-det-dist-", dir="/var/tmp"))
    c = Cluster(work, None).start()
    try:
        for name in ("node-a", "node-b"):
            own_tmp = work / f"{name}-tmp"
            own_tmp.mkdir()
            own_tmp.chmod(0o1777)  # the tasks run as their users' own uids
            agent = LocalAgent(work, c.master.url, name, slots=2, token=c.master.agent_token)
            agent.argv = wrap(
                agent.argv,
                [*_keep_visible(REPO, own_tmp), *_keep_visible(c.ckpts.parent, own_tmp), (str(own_tmp), "/tmp", False)],
            )
            agent.start()
            c.agents[name] = agent
            wait_for(lambda n=name: agent_connected(c.master, n), 60, what=f"agent {name}")
        cfg = det_config("det-core-dist", steps=3)
        cfg["entrypoint"] = "python3 -m determined.launch.torch_distributed -- python3 train.py"
        cfg["resources"] = {"slots_per_trial": 4}  # two agents of two slots: a world of four
        exp_id = c.create(cfg, MODELS / "det_dist")
        exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
        (trial,) = c.trials(exp_id)
        logs = c.logs(trial["id"])
        assert exp["state"] == "STATE_COMPLETED", logs
        metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
        assert [m["stepsCompleted"] for m in metrics] == [1, 2, 3]
        assert {(m["metrics"]["rank_sum"], m["metrics"]["world_size"]) for m in metrics} == {(6.0, 4.0)}
        for rank in range(4):
            assert f"rank {rank} of 4 done on" in logs
        (ckpt,) = c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        stored = c.work / "ckpts" / ckpt["uuid"]
        assert sorted(p.name for p in stored.iterdir() if p.name.startswith("rank")) == [
            f"rank{r}.json" for r in range(4)
        ]
        assert sorted(set(json.loads((stored / "rank0.json").read_text())["agents"])) == ["node-a", "node-b"]
    finally:
        c.stop()
        shutil.rmtree(work, ignore_errors=True)


def test_a_determined_trial_checkpoints_to_s3_and_pedl_collects_and_serves_it(moto_server, tmp_path) -> None:
    problem = probe()
    if problem is not None:
        pytest.skip(f"process tasks cannot get /run/determined/info here: {problem}")
    import boto3

    from tests.support.moto_server import FAKE_AWS_ENV, REGION, reset_moto

    reset_moto(moto_server)
    s3 = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing").client(
        "s3", endpoint_url=moto_server, region_name=REGION
    )
    s3.create_bucket(Bucket="det-core-ckpts")
    c = Cluster(
        tmp_path,
        None,
        {"security": {"checkpoint_storage_roots": ["s3://det-core-ckpts/runs"], "s3_endpoint_urls": [moto_server]}},
    )
    c.master.env.update(FAKE_AWS_ENV)
    c.start()
    try:
        c.add_agent("s3-agent", slots=1)
        cfg = det_config("det-core-s3", steps=9)
        # the region is pedl's key: Determined's harness gets it as AWS_DEFAULT_REGION instead
        cfg["checkpoint_storage"] = {
            "type": "s3",
            "bucket": "det-core-ckpts",
            "prefix": "runs",
            "endpoint_url": moto_server,
            "region": REGION,
            "save_trial_latest": 1,
            "save_trial_best": 0,
            "save_experiment_best": 0,
        }
        keys = {k: v for k, v in FAKE_AWS_ENV.items() if k.startswith("AWS_") and "REGION" not in k}
        cfg["environment"]["environment_variables"] += [f"{k}={v}" for k, v in keys.items()]
        exp_id = c.create(cfg, DET_MODEL)
        exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
        (trial,) = c.trials(exp_id)
        assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])

        def states() -> dict[int, str]:
            got = c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
            return {ck["metadata"]["steps_completed"]: ck["state"] for ck in got}

        # garbage collection keeps the latest (step 9) and deletes the others from the bucket
        wait_for(
            lambda: states() == {3: "STATE_DELETED", 6: "STATE_DELETED", 9: "STATE_COMPLETED"},
            60,
            what="checkpoint garbage collection",
        )
        kept = next(
            ck
            for ck in c.master.api("GET", f"/api/v1/experiments/{exp_id}/checkpoints")["checkpoints"]
            if ck["state"] == "STATE_COMPLETED"
        )
        listed = {o["Key"] for o in s3.list_objects_v2(Bucket="det-core-ckpts", Prefix="runs/").get("Contents", [])}
        assert f"runs/{kept['uuid']}/state.json" in listed
        assert not any(k.startswith("runs/") and "/state.json" in k and kept["uuid"] not in k for k in listed)
        # pedl serves it back (the master streams it from the bucket)
        out = tmp_path / "download"
        from typer.testing import CliRunner

        from pedl.cli.main import app

        got = CliRunner().invoke(app, ["-m", c.master.url, "checkpoint", "download", kept["uuid"], "-o", str(out)])
        assert got.exit_code == 0, got.output
        assert json.loads((out / "state.json").read_text())["step"] == 9
        # and so does det, which reads the bucket itself with the storage config the API gives it
        det(c, "checkpoint", "download", kept["uuid"], "--output-dir", str(tmp_path / "by-det"), env_extra=FAKE_AWS_ENV)
        assert json.loads((tmp_path / "by-det" / "state.json").read_text())["step"] == 9
    finally:
        c.stop()
