"""The real det CLI (0.38.1) runs commands on a pedl cluster (a master and a local agent, real
processes): det cmd run prints the command's output, det cmd list/logs/kill work on it."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest

from pedl.devcluster import wait_for
from tests.compat.test_det_cli import DET, det, ended
from tests.e2e.conftest import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def ntsc_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    c = Cluster(tmp_path_factory.mktemp("det-ntsc"), None).start()
    c.add_agent("ntsc-agent-1", slots=1)
    yield c
    c.stop()


def test_det_cmd_run_prints_the_output_and_the_logs_keep_it(ntsc_cluster, tmp_path) -> None:
    c = ntsc_cluster
    (tmp_path / "note.txt").write_text("from the context\n")
    out = det(c, "cmd", "run", "--context", str(tmp_path), "sh", "-c", "echo hi; cat note.txt").stdout
    assert "hi" in out.splitlines() and "from the context" in out, out
    # it has ended: det lists it as terminated (for a day), as Determined's master does
    listed = json.loads(det(c, "cmd", "list", "-a", "--json").stdout)
    assert listed and {x["state"] for x in listed} == {"TERMINATED"}, listed  # det prints the enum bare


def test_det_cmd_list_logs_and_kill_a_running_command(ntsc_cluster) -> None:
    c = ntsc_cluster
    cmd_id = det(c, "cmd", "run", "-d", "sh", "-c", "echo started; sleep 600").stdout.strip()
    assert cmd_id in det(c, "cmd", "list", "-q").stdout
    wait_for(lambda: "started" in det(c, "cmd", "logs", cmd_id).stdout, timeout=60, what="the command's output")
    det(c, "cmd", "kill", cmd_id)
    wait_for(lambda: ended(c, "commands", cmd_id), timeout=60, what="the command to end")
    state = c.master.api("GET", f"/api/v1/commands/{cmd_id}")["command"]["state"]
    assert state == "STATE_TERMINATED"


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent changes user only as root")
def test_a_linked_users_command_sees_its_linked_names_even_where_the_host_has_no_such_account(ntsc_cluster) -> None:
    c = ntsc_cluster
    det(c, "-u", "admin", "user", "create", "dora", "--password", "Dora-Pass-123", stdin="\n")
    det(
        c,
        "-u",
        "admin",
        "user",
        "link-with-agent-user",
        "dora",
        "--agent-uid",
        "2000000000",
        "--agent-gid",
        "2000000001",
        "--agent-user",
        "someuser",
        "--agent-group",
        "somegroup",
        stdin="\n",
    )
    det(c, "user", "login", "dora", stdin="Dora-Pass-123\n")
    out = det(
        c,
        "-u",
        "dora",
        "cmd",
        "run",
        "bash",
        "-c",
        "echo NAMES $(id -u -n):$(id -u):$(id -g -n):$(id -g)",
        stdin="Dora-Pass-123\n",
    ).stdout
    assert "NAMES someuser:2000000000:somegroup:2000000001" in out, out
    # the host's own account files are untouched
    assert "someuser" not in Path("/etc/passwd").read_text()


def test_det_inside_a_command_acts_as_its_owner_with_det_user_token(ntsc_cluster, tmp_path) -> None:
    """Determined's habit: `det` inside a task (a notebook, a command) is already logged in as the
    task's owner. alice has a password, so without DET_USER_TOKEN det inside could neither fall back to
    the blank-password default user nor prompt (no terminal)."""
    c = ntsc_cluster
    admin = httpx.post(f"{c.master.url}/api/v1/auth/login", json={"username": "admin", "password": ""}).json()["token"]
    r = httpx.post(
        f"{c.master.url}/api/v1/users",
        headers={"Authorization": f"Bearer {admin}"},
        json={"user": {"username": "alice", "active": True}, "password": "Pw-alice-1", "isHashed": False},
    )
    assert r.status_code == 200, r.text
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DET_", "PEDL_"))}
    env.update(
        {
            "DET_DEBUG_CONFIG_PATH": str(tmp_path / "det-config"),
            "DET_MASTER": c.master.url,
            "DET_USER": "alice",
            "DET_PASS": "Pw-alice-1",
        }
    )
    inner = f"env -u DET_PASS DET_DEBUG_CONFIG_PATH=$(mktemp -d) {DET} user whoami"
    done = subprocess.run(
        [str(DET), "-m", c.master.url, "cmd", "run", "sh", "-c", inner],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "You are logged in as user 'alice'" in done.stdout, done.stdout
