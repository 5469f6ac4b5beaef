"""The real det CLI (determined==0.38.1) against a pedl master serving HTTPS (security.tls): det trusts
it through its own DET_MASTER_CERT_FILE, and refuses a master its CA did not sign."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pedl.devcluster import LocalAgent, agent_connected, wait_experiment, wait_for
from tests.e2e.conftest import FAST_AGENTS, MODELS, steps_config
from tests.support.tls import HttpsMaster, TlsFiles, write_tls_files

pytestmark = [pytest.mark.compat, pytest.mark.e2e]
DET = Path(__file__).parents[2] / ".venv-det" / "bin" / "det"


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> TlsFiles:
    return write_tls_files(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory, tls: TlsFiles):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET} (make det-venv could not install the package)")
    work = tmp_path_factory.mktemp("det-tls")
    m = HttpsMaster(work, tls, {**FAST_AGENTS,
                                "checkpoint_storage": {"type": "shared_fs", "host_path": str(work / "ckpts")}})
    m.start()
    agent = LocalAgent(work, m.url, "det-tls-agent", slots=1, token=m.agent_token)
    agent.argv += ["--cert", str(tls.ca)]
    agent.start()
    wait_for(lambda: agent_connected(m, "det-tls-agent"), 60, what="the agent to register over wss")
    yield m
    agent.stop()
    m.stop()


def det(m: HttpsMaster, cert: Path, *args: str, stdin: str = "", check: bool = True) -> subprocess.CompletedProcess:
    # requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE override the bundle det sets on its session
    # (psf/requests#3829), so with either set det never uses DET_MASTER_CERT_FILE
    dropped = ("DET_USER", "DET_PASS", "PEDL_MASTER_CERT", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")
    env = {k: v for k, v in os.environ.items() if k not in dropped}
    env.update({"DET_DEBUG_CONFIG_PATH": str(m.work_dir / "det-config"), "DET_MASTER": m.url,
                "DET_MASTER_CERT_FILE": str(cert)})
    proc = subprocess.run([str(DET), "-m", m.url, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=120)
    if check and proc.returncode != 0:
        raise AssertionError(f"det {' '.join(args)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_master_info_over_https(master: HttpsMaster, tls: TlsFiles) -> None:
    info = json.loads(det(master, tls.ca, "master", "info", "--json").stdout)
    assert info["clusterId"] and info["version"]


def test_user_login_and_whoami_over_https(master: HttpsMaster, tls: TlsFiles) -> None:
    det(master, tls.ca, "user", "login", "determined", stdin="\n")
    assert "determined" in det(master, tls.ca, "user", "whoami").stdout


def test_agent_list_over_https(master: HttpsMaster, tls: TlsFiles) -> None:
    agents = json.loads(det(master, tls.ca, "agent", "list", "--json").stdout)
    assert [a["id"] for a in agents] == ["det-tls-agent"]


def test_experiment_create_and_list_over_https(master: HttpsMaster, tls: TlsFiles, tmp_path: Path) -> None:
    cfg = tmp_path / "const.yaml"
    cfg.write_text(yaml.safe_dump(steps_config(name="det-over-tls", steps=4)))
    out = det(master, tls.ca, "experiment", "create", str(cfg), str(MODELS / "steps")).stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    assert wait_experiment(master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    listing = det(master, tls.ca, "experiment", "list").stdout
    assert "det-over-tls" in listing and "COMPLETED" in listing


def test_det_refuses_a_master_its_ca_did_not_sign(master: HttpsMaster, tls: TlsFiles) -> None:
    # det offers to trust the certificate it was sent; answering no, it stops
    proc = det(master, tls.other_ca, "master", "info", stdin="n\n", check=False)
    assert proc.returncode != 0
    assert "untrusted certificate" in proc.stdout + proc.stderr
    assert "Unable to verify master certificate" in proc.stderr
