"""A task may register as its service's port only one its own processes listen on, on real processes:
a trial claims a port another process of the host listens on (refused, 400 naming it) and one it
listens on itself (taken), as a process and in a Docker container (whose processes the agent finds
through `docker inspect`)."""

from __future__ import annotations

import json
import shutil
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from pedl.devcluster import wait_experiment
from tests.e2e.conftest import MODELS, Cluster

pytestmark = pytest.mark.e2e


@pytest.fixture
def work() -> Iterator[Path]:
    """The cluster's directory, one every user may enter (the trial runs as a user of its own)."""
    path = Path(tempfile.mkdtemp(prefix="pedl-ports-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def claims(work: Path, image: str | None = None) -> tuple[dict, int]:
    outsider = socket.socket()  # another user's service, say
    outsider.bind(("0.0.0.0", 0))
    outsider.listen()
    c = Cluster(work, None).start()
    try:
        c.add_agent("a1")
        config = {
            "name": "port-claim",
            "entrypoint": "python3 train.py",
            "max_restarts": 0,
            "hyperparameters": {"other_port": outsider.getsockname()[1]},
            "searcher": {"name": "single", "metric": "claimed", "max_length": {"batches": 1}},
            "resources": {"slots_per_trial": 1},
        }
        if image is not None:
            config["environment"] = {"image": image}
        exp = wait_experiment(
            c.master, c.create(config, model_dir=MODELS / "port_claim"), {"STATE_COMPLETED", "STATE_ERROR"}
        )
        (trial,) = c.trials(exp["id"])
        logs = c.logs(trial["id"])
        assert exp["state"] == "STATE_COMPLETED", logs[-3000:]
        (line,) = [x for x in logs.splitlines() if x.startswith("PORTS ")]
        return json.loads(line.removeprefix("PORTS ")), outsider.getsockname()[1]
    finally:
        c.stop()
        outsider.close()


def check(answers: dict, other: int) -> None:
    status, message = answers["other"]
    assert status == 400 and f"port {other} is not a port of this task" in message, answers
    assert answers["own"] == [200, ""], answers


def test_a_process_task_registers_only_its_own_port(work: Path) -> None:
    """Before, any port was taken, and a shell's credential-less tunnel then reached another user's service."""
    check(*claims(work))


def test_a_container_task_registers_only_its_own_port(work: Path, docker_daemon, test_image) -> None:
    check(*claims(work, test_image))
