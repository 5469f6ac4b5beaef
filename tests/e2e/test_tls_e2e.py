"""A master with a certificate (security.tls) on real processes: it serves the API over HTTPS and the
agent WebSocket over WSS, an agent given its CA runs a trial to COMPLETED (pedl.core in the task
verifies the master with the CA the agent hands it), and an agent or CLI with the wrong CA is refused
with a message saying so."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml

from pedl.cli.model_upload import pack_model_dir
from pedl.devcluster import LocalAgent, agent_connected, pedl_command, wait_experiment, wait_for
from tests.e2e.conftest import FAST_AGENTS, MODELS, steps_config
from tests.support.shared_dirs import enterable_twin
from tests.support.tls import HttpsMaster, TlsFiles, write_tls_files

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles):
    work = tmp_path_factory.mktemp("tls-master")
    storage = {"type": "shared_fs", "host_path": str(enterable_twin(work) / "ckpts")}  # tasks run as their users
    m = HttpsMaster(work, tls, {**FAST_AGENTS, "checkpoint_storage": storage})
    m.start()
    yield m
    m.stop()


def pedl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("PEDL_MASTER_CERT", "DET_MASTER_CERT_FILE")}
    return subprocess.run(
        [*pedl_command(), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**base, "COLUMNS": "200", **(env or {})},
    )


def start_agent(master: HttpsMaster, work: Path, agent_id: str, cert: Path | None) -> LocalAgent:
    agent = LocalAgent(work, master.url, agent_id, token=master.agent_token)
    if cert is not None:
        agent.argv += ["--cert", str(cert)]
    for name in ("PEDL_MASTER_CERT", "DET_MASTER_CERT_FILE"):
        agent.env.pop(name, None)
    return agent.start()


def test_the_master_logs_an_https_url_and_serves_the_api_to_a_cli_with_its_ca(
    master: HttpsMaster, tls: TlsFiles, tmp_path: Path
) -> None:
    assert re.search(rf"pedl master listening on https://127\.0\.0\.1:{master.port}\n", master.log_text())
    env = {"PEDL_CONFIG_DIR": str(tmp_path / "cli")}
    info = pedl("-m", master.url, "--cert", str(tls.ca), "master", "info", "--json", env=env)
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["clusterId"]
    listed = pedl("-m", master.url, "agent", "list", "--json", env={**env, "PEDL_MASTER_CERT": str(tls.ca)})
    assert listed.returncode == 0, listed.stderr


def test_an_agent_registers_over_wss_and_runs_a_trial_to_completed(
    master: HttpsMaster, tls: TlsFiles, tmp_path: Path
) -> None:
    agent = start_agent(master, tmp_path, "tls-agent", tls.ca)
    try:
        wait_for(lambda: agent_connected(master, "tls-agent"), 60, what="the agent to register over wss")
        config = yaml.safe_dump(steps_config(name="over-tls", steps=6))
        body = {"config": config, "modelDefinition": pack_model_dir(MODELS / "steps"), "activate": True}
        exp_id = master.api("POST", "/api/v1/experiments", body)["experiment"]["id"]
        exp = wait_experiment(master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
        assert exp["state"] == "STATE_COMPLETED", agent.log_text()[-3000:]
        (trial,) = master.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
        assert trial["totalBatchesProcessed"] == 6  # reported by pedl.core over https
    finally:
        agent.stop()


@pytest.mark.parametrize("trusts", ["another CA", "the system's CAs"])
def test_an_agent_with_the_wrong_ca_is_refused_saying_so(
    master: HttpsMaster, tls: TlsFiles, tmp_path: Path, trusts: str
) -> None:
    cert = tls.other_ca if trusts == "another CA" else None
    agent = start_agent(master, tmp_path, f"wrong-ca-{len(trusts)}", cert)
    wait_for(lambda: not agent.alive(), 60, what="the agent to give up")
    assert agent.stop() == 1
    log = agent.log_text()
    assert "Traceback" not in log
    against = f"the CA in {cert}" if cert else "the system's CAs"
    assert (
        f"error: the agent refuses the master: the TLS certificate of the master at "
        f"wss://127.0.0.1:{master.port}/agents/ws could not be verified against {against}"
    ) in log, log
    assert "pass the CA certificate that signed the master's with --cert FILE or PEDL_MASTER_CERT" in log


def test_a_cli_with_the_wrong_ca_or_plain_http_is_refused_saying_so(
    master: HttpsMaster, tls: TlsFiles, tmp_path: Path
) -> None:
    env = {"PEDL_CONFIG_DIR": str(tmp_path / "cli")}
    for cert, against in ((["--cert", str(tls.other_ca)], f"the CA in {tls.other_ca}"), ([], "the system's CAs")):
        result = pedl("-m", master.url, *cert, "agent", "list", env=env)
        assert result.returncode == 1 and "Traceback" not in result.stderr
        assert result.stderr.strip().startswith(
            f"error: the TLS certificate of the master at {master.url} could not be verified against {against}"
        )
        assert "--cert FILE or PEDL_MASTER_CERT" in result.stderr
    plain = master.url.replace("https://", "http://")
    result = pedl("-m", plain, "agent", "list", env=env)
    assert result.returncode == 1
    assert "if it serves HTTPS, use an https:// URL" in result.stderr, result.stderr


def test_dynamic_local_agents_reach_an_https_master_with_its_ca(
    tls: TlsFiles, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A pool with a provider over TLS: the master launches its agents with an https:// URL and the
    CA in its certificate chain (PEDL_MASTER_CERT), and their trial's pedl.core verifies it too."""
    work = tmp_path_factory.mktemp("tls-dynamic")
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "max_instances": 1,
        "boot_delay": "0.5s",
        "max_idle_agent_period": "60s",
    }
    storage = {"type": "shared_fs", "host_path": str(enterable_twin(work) / "ckpts")}  # tasks run as their users
    m = HttpsMaster(
        work,
        tls,
        {
            **FAST_AGENTS,
            "resource_pools": [{"pool_name": "default", "provider": provider}],
            "checkpoint_storage": storage,
        },
    )
    m.start()
    try:
        config = yaml.safe_dump(steps_config(name="dynamic-over-tls", steps=4))
        body = {"config": config, "modelDefinition": pack_model_dir(MODELS / "steps"), "activate": True}
        exp_id = m.api("POST", "/api/v1/experiments", body)["experiment"]["id"]
        exp = wait_experiment(m, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
        logs = "\n".join(p.read_text() for p in (m.data_dir / "local-instances").glob("*.log"))
        assert exp["state"] == "STATE_COMPLETED", logs[-3000:]
        (agent,) = m.api("GET", "/api/v1/agents")["agents"]
        assert agent["id"].startswith("local-default-")
        (trial,) = m.api("GET", f"/api/v1/experiments/{exp_id}/trials")["trials"]
        assert trial["totalBatchesProcessed"] == 4
    finally:
        m.stop()
        m.stop_local_instances()
