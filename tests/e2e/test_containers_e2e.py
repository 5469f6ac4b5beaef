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
    return {
        "name": name,
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {"delay": 0.05, "ckpt_every": 3},
        "searcher": {"name": "single", "metric": "validation_loss", "max_length": {"batches": steps}},
        "environment": {"image": image},
        "resources": {"slots_per_trial": 1},
        **extra,
    }


def test_a_determined_trial_runs_in_its_image_with_its_mounts(
    docker_daemon, test_image, make_cluster, tmp_path
) -> None:
    c = make_cluster()
    c.add_agent("docker-agent", slots=1)
    data = tmp_path / "data"
    data.mkdir()
    (data / "hello.txt").write_text("from the host")
    cfg = container_config(
        "in-a-container",
        test_image,
        bind_mounts=[{"host_path": str(data), "container_path": "/data", "read_only": True}],
    )
    cfg["entrypoint"] = (
        "cat /data/hello.txt && (touch /data/x 2>/dev/null || echo read-only-ok) "
        "&& cat /etc/debian_version && python3 train.py"
    )
    exp_id = c.create(cfg, MODELS / "det_core")
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs
    assert "from the host" in logs and "read-only-ok" in logs and not (data / "x").exists()
    assert "running in container pedl-" in logs
    # the agent said it runs containers; the API (and `pedl agent list`) shows it
    (listed,) = c.master.api("GET", "/api/v1/agents")["agents"]
    assert listed["containerRuntime"] == "docker"
    metrics = c.master.api("GET", f"/api/v1/trials/{trial['id']}/metrics", group="training")["metrics"]
    assert [m["stepsCompleted"] for m in metrics] == [1, 2, 3, 4, 5, 6]
    ckpts = [
        ck
        for ck in c.master.api("GET", f"/api/v1/trials/{trial['id']}/checkpoints")["checkpoints"]
        if ck["state"] == "STATE_COMPLETED"
    ]
    assert ckpts
    for ck in ckpts:
        state = json.loads((c.work / "ckpts" / ck["uuid"] / "state.json").read_text())
        assert state["step"] == ck["metadata"]["steps_completed"]
    # the container is gone with its task
    left = subprocess.run(
        ["docker", "ps", "-aq", "--filter", "label=pedl.agent-id=docker-agent"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
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

    agents = {a["id"]: a for a in c.master.api("GET", "/api/v1/agents")["agents"]}
    assert agents["plain-agent"]["containerRuntime"] == ""
    wait_for(lambda: "runs containers" in reason(), 60, what="the wait reason")
    (trial,) = c.trials(exp_id)
    assert trial["state"] in ("STATE_QUEUED", "STATE_ACTIVE")
    assert "none of the 1 agent of pool default runs containers" in reason()


def _containers(agent_id: str) -> list[str]:
    return subprocess.run(
        ["docker", "ps", "-aq", "--filter", f"label=pedl.agent-id={agent_id}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def _steps(c, trial_id: int) -> list[int]:
    metrics = c.master.api("GET", f"/api/v1/trials/{trial_id}/metrics", group="training")["metrics"]
    return [m["stepsCompleted"] for m in metrics]


def _running_in_container(c, exp_id: int, step: int = 3) -> dict:
    def at_step() -> dict | None:
        trials = c.trials(exp_id)
        return (
            trials[0]
            if trials and "checkpoint" in c.logs(trials[0]["id"]) and len(_steps(c, trials[0]["id"])) >= step
            else None
        )

    return wait_for(at_step, 120, what=f"the containerized trial past step {step}")


def test_kill_and_pause_reach_a_containerized_trial(docker_daemon, test_image, make_cluster) -> None:
    c = make_cluster()
    c.add_agent("docker-faults", slots=1)
    killed = c.create(
        container_config(
            "killed-in-a-container", test_image, steps=200, hyperparameters={"delay": 0.2, "ckpt_every": 3}
        ),
        MODELS / "det_core",
    )
    _running_in_container(c, killed)
    assert _containers("docker-faults")
    c.master.api("POST", f"/api/v1/experiments/{killed}/kill")
    assert wait_experiment(c.master, killed, {"STATE_CANCELED", "STATE_ERROR"}, timeout=90)["state"] == "STATE_CANCELED"
    wait_for(lambda: _containers("docker-faults") == [], 30, what="the killed trial's container removed")

    paused = c.create(
        container_config(
            "paused-in-a-container", test_image, steps=20, hyperparameters={"delay": 0.2, "ckpt_every": 3}
        ),
        MODELS / "det_core",
    )
    trial = _running_in_container(c, paused)
    c.master.api("POST", f"/api/v1/experiments/{paused}/pause")
    wait_for(lambda: c.trials(paused)[0]["state"] == "STATE_PAUSED", 90, what="the trial paused")
    assert "preempted at step" in c.logs(trial["id"])
    wait_for(lambda: _containers("docker-faults") == [], 30, what="the paused trial's container removed")
    c.master.api("POST", f"/api/v1/experiments/{paused}/activate")
    exp = wait_experiment(c.master, paused, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=180)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    assert "resumed from" in c.logs(trial["id"])
    assert _steps(c, trial["id"]) == list(range(1, 21))  # none lost, none twice


@pytest.mark.parametrize("e2e_db", ["postgres"], indirect=True)  # one database (tests/e2e/conftest.py: e2e_db)
def test_a_containerized_trial_outlives_a_sigkilled_agent_and_master(
    docker_daemon, test_image, e2e_db, make_cluster
) -> None:
    import signal

    # a reconnect wait that outlasts a master restart on a loaded machine (the agent fences itself past it)
    c = make_cluster({"agent_reconnect_wait": "40s"}, db=e2e_db)
    agent = c.add_agent("docker-phoenix", slots=1)
    exp_id = c.create(
        container_config("outlives-its-agent", test_image, steps=40, hyperparameters={"delay": 0.25, "ckpt_every": 5}),
        MODELS / "det_core",
    )
    trial = _running_in_container(c, exp_id)
    agent.signal(signal.SIGKILL)  # the agent dies; its container does not
    agent.proc.wait(10)
    assert _containers("docker-phoenix")
    agent.start()  # back within the master's reconnect wait: it takes the container up again
    wait_for(lambda: "took up container" in c.logs(trial["id"]), 60, what="the container taken up again")
    c.restart_master()  # and the master dies too, mid-run
    exp = wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"}, timeout=240)
    (trial,) = c.trials(exp_id)
    assert exp["state"] == "STATE_COMPLETED", c.logs(trial["id"])
    assert trial["restarts"] == 0  # never restarted: the same container ran it to the end
    assert _steps(c, trial["id"]) == list(range(1, 41))
    wait_for(lambda: _containers("docker-phoenix") == [], 30, what="the container removed")


def test_a_command_runs_in_its_image(docker_daemon, test_image, make_cluster, tmp_path) -> None:
    """Commands, notebooks, shells and TensorBoards run in their environment.image as trials do."""
    c = make_cluster()
    c.add_agent("docker-agent", slots=1)
    cmd = c.master.api(
        "POST",
        "/api/v1/commands",
        {
            "config": {
                "entrypoint": ["sh", "-c", "echo IN-IMAGE $(cat /etc/debian_version)"],
                "environment": {"image": test_image},
            }
        },
    )["command"]

    def ended() -> dict | None:
        task = c.master.api("GET", f"/api/v1/tasks/{cmd['id']}")["task"]
        return task if task["endTime"] else None

    task = wait_for(ended, 240, what="the command to end")
    text = c.master.api("GET", f"/api/v1/tasks/{cmd['id']}/logs")
    lines = [json.loads(raw)["result"]["log"] for raw in text.splitlines() if raw]
    assert task["allocations"][0]["statusCode"] == 0, lines
    assert any("running in container pedl-" in line for line in lines), lines
    debian = subprocess.run(
        ["docker", "run", "--rm", test_image, "cat", "/etc/debian_version"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert any(f"IN-IMAGE {debian}" in line for line in lines), lines
