"""Agents' secrets stay out of tasks' reach, on real processes: a trial on an agent started by the
local provider, and on a static agent, looks for the cluster's agent token (the enrollment secret) and
its agent's own credential in its environment, in /proc/*/cmdline and /proc/*/environ of every process
it can see, and in every file it can read under the cluster's directories (the master's data, the
agents' work dirs), and finds neither; decoys placed where it can read show that it looks. A rogue
holding the agent token cannot take a registered agent's id."""

from __future__ import annotations

import hashlib
import json
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from pedl.common import agent_protocol as proto
from pedl.devcluster import LocalAgent, agent_connected, wait_experiment, wait_for
from pedl.master.agents.credentials import HAS_CREDENTIAL
from pedl.version import __version__
from tests.e2e.conftest import MODELS, Cluster, steps_config

pytestmark = pytest.mark.e2e

DONE = {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"}


@pytest.fixture
def work() -> Iterator[Path]:
    """The cluster's directory, one every user may enter (pytest's are root's alone): so the trial's
    user reaches the files, and only their own modes keep it out."""
    path = Path(tempfile.mkdtemp(prefix="pedl-secrets-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def scan(
    c: Cluster, work: Path, secrets_by_name: dict[str, str], *, image: str | None = None, roots: list[str] | None = None
) -> tuple[list[list[str]], dict[str, int]]:
    """Run the scanning trial (in `image`, when given) over `roots` (default: the cluster's directory);
    what it found (name, where) and how much it read."""
    decoy_env, decoy_file = secrets.token_urlsafe(32), secrets.token_urlsafe(32)
    decoy = work / "readable-decoy.txt"
    decoy.write_text(f"a file every user may read holds {decoy_file}\n")
    decoy.chmod(0o644)
    names = {**secrets_by_name, "decoy in the environment": decoy_env, "decoy file": decoy_file}
    assert all(len(s) == 43 for s in names.values())  # what the trial looks for
    config = {
        "name": "secret-scan",
        "entrypoint": "python3 train.py",
        "max_restarts": 0,
        "hyperparameters": {
            "digests": json.dumps({n: digest(s) for n, s in names.items()}),
            "roots": json.dumps(roots or [str(work)]),
        },
        "searcher": {"name": "single", "metric": "found", "max_length": {"batches": 1}},
        "resources": {"slots_per_trial": 1},
        "environment": {"environment_variables": [f"DECOY={decoy_env}"]},
    }
    if image is not None:
        config["environment"]["image"] = image
    exp_id = c.create(config, model_dir=MODELS / "secret_scan")
    exp = wait_experiment(c.master, exp_id, DONE)
    (trial,) = c.trials(exp_id)
    logs = c.logs(trial["id"])
    assert exp["state"] == "STATE_COMPLETED", logs[-3000:]
    (line,) = [x for x in logs.splitlines() if x.startswith("SCAN ")]
    report = json.loads(line.removeprefix("SCAN "))
    return report["found"], report["read"]


def local_pool() -> dict:
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "min_instances": 1,
        "max_instances": 1,
        "max_idle_agent_period": "60s",
    }
    return {"resource_pools": [{"pool_name": "default", "provider": provider}]}


@pytest.mark.parametrize("started_by", ["the local provider", "a static agent"])
def test_a_trial_finds_neither_the_agent_token_nor_its_agents_credential(work: Path, started_by: str) -> None:
    """Before, the agent copied its environment into each task (a trial printed PEDL_AGENT_TOKEN), and an
    agent started with --token showed it in /proc/<pid>/cmdline."""
    local = started_by == "the local provider"
    c = Cluster(work, None, local_pool() if local else None).start()
    try:
        if local:
            instance = wait_for(
                lambda: [i for i in c.master.api("GET", "/api/v1/instances")["instances"] if i["state"] == "RUNNING"],
                60,
                what="the local instance's agent",
            )[0]
            agent_id = instance["id"]
            agent_dir = c.master.data_dir / "local-instances" / agent_id
        else:
            agent_id = "a1"
            c.add_agent(agent_id)
            agent_dir = work / f"agent-{agent_id}"
        credential = wait_for(
            lambda: (agent_dir / "agent.credential").is_file() and (agent_dir / "agent.credential").read_text().strip(),
            30,
            what="the agent's credential file",
        )
        assert (agent_dir / "agent.credential").stat().st_mode & 0o777 == 0o600
        found, read = scan(c, work, {"the agent token": c.master.agent_token, "the agent's credential": credential})
    finally:
        c.stop()
    assert {name for name, _ in found} == {"decoy in the environment", "decoy file"}, found
    assert ["decoy in the environment", "os.environ"] in found
    assert read["proc_cmdline"] >= 1 and read["proc_environ"] >= 1 and read["files"] >= 1, read


def test_a_containerized_trial_finds_neither_either(work: Path, docker_daemon, test_image) -> None:
    """A container gets the task's variables only (an env file), never the agent's or its docker client's."""
    c = Cluster(work, None).start()
    try:
        c.add_agent("a1")
        path = work / "agent-a1" / "agent.credential"
        credential = wait_for(lambda: path.is_file() and path.read_text().strip(), 30, what="the credential file")
        found, read = scan(
            c,
            work,
            {"the agent token": c.master.agent_token, "the agent's credential": credential},
            image=test_image,
            roots=["/run/determined"],
        )
    finally:
        c.stop()
    assert {name for name, _ in found} == {"decoy in the environment"}, found
    assert read["proc_environ"] >= 1 and read["files"] >= 1, read


def test_a_rogue_with_the_agent_token_cannot_take_an_agents_id(work: Path) -> None:
    """Before, the master accepted the rogue's registration under a1's id and closed the real a1 (4409)."""
    cluster = Cluster(work, None).start()
    try:
        _rogue_against(cluster, cluster.add_agent("a1"))
    finally:
        cluster.stop()


def _rogue_against(cluster: Cluster, a1: LocalAgent) -> None:
    url = cluster.master.url.replace("http://", "ws://") + "/agents/ws"
    register = proto.Register(
        agent_id="a1",
        hostname="rogue",
        address="127.0.0.1",
        version=__version__,
        slots=[proto.SlotInfo(id=str(i)) for i in range(4)],
    )
    with (
        pytest.raises(ConnectionClosed) as info,
        connect(url, additional_headers={proto.TOKEN_HEADER: cluster.master.agent_token}) as rogue,
    ):
        rogue.send(register.model_dump_json())
        rogue.recv()
    assert info.value.rcvd is not None
    assert (info.value.rcvd.code, info.value.rcvd.reason) == (proto.CLOSE_UNAUTHORIZED, HAS_CREDENTIAL)
    # a1 kept its connection and its slot, and runs the next trial
    assert agent_connected(cluster.master, "a1")
    (agent,) = [a for a in cluster.master.api("GET", "/api/v1/agents")["agents"] if a["id"] == "a1"]
    assert len(agent["slots"]) == 1
    exp = wait_experiment(cluster.master, cluster.create(steps_config(steps=2)), DONE)
    assert exp["state"] == "STATE_COMPLETED"
    assert "closed by the master" not in a1.log_text() and "4409" not in a1.log_text()
