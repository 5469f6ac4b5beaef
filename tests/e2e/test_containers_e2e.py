"""Trials in Docker containers under a real daemon, on the offline-built test image: a script on
Determined's Core API, unmodified, to COMPLETED with metrics and checkpoints; bind mounts (read_only
included); an unknown image and an agent without Docker, each refused with a clear reason."""

from __future__ import annotations

import json
import subprocess

import pytest

from pedl.devcluster import wait_experiment, wait_for
from tests.e2e.conftest import MODELS

pytestmark = pytest.mark.e2e


def container_config(name: str, image: str, *, steps: int = 6, **extra) -> dict:
    return {"name": name, "entrypoint": "python3 train.py", "max_restarts": 0,
            "hyperparameters": {"delay": 0.05, "ckpt_every": 3},
            "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": steps}},
            "environment": {"image": image}, "resources": {"slots_per_trial": 1}, **extra}


def test_a_determined_trial_runs_in_its_image_with_its_mounts(docker_daemon, test_image, make_cluster,
                                                              tmp_path) -> None:
    c = make_cluster()
    c.add_agent("docker-agent", slots=1)
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("from the host")
    cfg = container_config("in-a-container", test_image, bind_mounts=[
        {"host_path": str(data), "container_path": "/data", "read_only": True}])
    cfg["entrypoint"] = ("cat /data/hello.txt && (touch /data/x 2>/dev/null || echo read-only-ok) "
                         "&& cat /etc/debian_version && python3 train.py")
    exp_id = c.create(cfg, MODELS / "det_core")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert "from the host" in logs and "read-only-ok" in logs and not (data / "x").exists()
    assert "running in container pedl-" in logs
    metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    ckpts = [ck for ck in c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
             if ck["state"] == "STATE_COMPLETED"]
    assert ckpts
    for ck in ckpts:
        state = json.loads((c.work / "ckpts" / ck["uuid"] / "state.json").read_text())
        assert state["step"] == ck["metadata"]["steps_completed"]
    # the container is gone with its task
    left = subprocess.run(["docker", "ps", "-aq", "--filter", "label=pedl.agent-id=docker-agent"],
                          capture_output=True, text=True, check=True).stdout.split()
    assert left == []


def test_an_unknown_image_fails_naming_it(docker_daemon, make_cluster) -> None:
    from tests.support.docker import unknown_image_name

    c = make_cluster()
    c.add_agent("docker-agent-2", slots=1)
    image = unknown_image_name()
    exp_id = c.create(container_config("unknown-image", image), MODELS / "det_core")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    assert exp["state"] == "STATE_ERROR"
    (trial,) = c.trials(exp_id)
    assert f"cannot pull image {image!r}" in c.logs(trial["id"])


def test_an_image_waits_with_a_reason_on_an_agent_without_docker(docker_daemon, test_image, make_cluster) -> None:
    c = make_cluster()
    agent = c.add_agent("no-docker", slots=1)
    assert agent is not None
    c.agents["no-docker"].stop()
    c.agents.pop("no-docker")
    from pedl.devcluster import LocalAgent, agent_connected

    plain = LocalAgent(c.work, c.master.url, "plain-agent", slots=1, token=c.master.agent_token)
    plain.argv += ["--container-runtime", "none"]
    plain.start()
    c.agents["plain-agent"] = plain
    wait_for(lambda: agent_connected(c.master, "plain-agent"), 60, what="the plain agent")
    exp_id = c.create(container_config("needs-docker", test_image), MODELS / "det_core")

    def reason() -> str:
        trials = c.trials(exp_id)
        if not trials:
            return ""
        got = c.master.api("GET", f"/api/v1/trials/{trials[0]['id']}")
        return json.dumps(got)

    wait_for(lambda: "run no containers" in reason(), 60, what="the wait reason")
    (trial,) = c.trials(exp_id)
    assert trial["state"] in ("STATE_QUEUED", "STATE_ACTIVE")
    assert "plain-agent" in reason()
