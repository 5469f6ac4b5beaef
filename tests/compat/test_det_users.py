"""The real det CLI (determined==0.38.1) editing users on a pedl master: create, link with an agent
user, edit, rename, deactivate and activate, the refusals a non-admin gets, and a linked user's
trial running as its agent user on a real agent."""

from __future__ import annotations

import os

import pytest
import yaml

from pedl.devcluster import wait_experiment
from tests.compat.test_det_cli import DET, det
from tests.e2e.conftest import MODELS, Cluster, steps_config

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def users_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    c = Cluster(tmp_path_factory.mktemp("det-users"), None).start()
    c.add_agent("users-agent-1", slots=1)
    yield c
    c.stop()


def users(c: Cluster) -> dict[str, dict]:
    return {u["username"]: u for u in c.master.api("GET", "/api/v1/users")["users"]}


def test_det_edits_users_and_links_them_with_agent_users(users_cluster) -> None:
    c = users_cluster
    admin = ("-u", "admin")
    det(c, *admin, "user", "create", "bob", "--password", "Bob-Pass-123", stdin="\n")
    det(c, *admin, "user", "link-with-agent-user", "bob", "--agent-uid", "2000000000", "--agent-gid", "2000000000",
        "--agent-user", "someuser", "--agent-group", "somegroup", stdin="\n")
    assert users(c)["bob"]["agentUserGroup"] == {"agentUid": 2000000000, "agentGid": 2000000000,
                                                  "agentUser": "someuser", "agentGroup": "somegroup"}
    listed = det(c, *admin, "user", "list", stdin="\n").stdout
    assert "bob" in listed and "someuser" in listed and "2000000000" in listed

    det(c, *admin, "user", "edit", "bob", "--display-name", "Bob B", "--username", "bobby", "--active=true",
        "--remote=false", "--admin=false", stdin="\n")
    bob = users(c)["bobby"]
    assert (bob["displayName"], bob["active"], bob["admin"]) == ("Bob B", True, False)
    det(c, *admin, "user", "rename", "bobby", "bob", stdin="\n")
    det(c, *admin, "user", "deactivate", "bob", stdin="\n")
    assert "bob" not in det(c, *admin, "user", "ls", stdin="\n").stdout
    assert "bob" in det(c, *admin, "user", "ls", "--all", stdin="\n").stdout
    refused = det(c, "user", "login", "bob", stdin="Bob-Pass-123\n", check=False)
    assert refused.returncode != 0
    det(c, *admin, "user", "activate", "bob", stdin="\n")
    det(c, "user", "login", "bob", stdin="Bob-Pass-123\n")

    # a non-admin may not link, rename or activate anyone, itself included; det says "Forbidden"
    for args in (("user", "link-with-agent-user", "bob", "--agent-uid", "1", "--agent-gid", "1", "--agent-user",
                  "x", "--agent-group", "x"), ("user", "rename", "bob", "robert"), ("user", "deactivate", "admin")):
        proc = det(c, "-u", "bob", *args, stdin="Bob-Pass-123\n", check=False)
        assert proc.returncode != 0 and "forbidden" in (proc.stdout + proc.stderr).lower(), args
    assert "bob" in users(c)


@pytest.mark.skipif(os.geteuid() != 0, reason="the agent changes user only as root")
def test_a_linked_users_trial_runs_as_its_agent_user(users_cluster, tmp_path) -> None:
    c = users_cluster
    det(c, "-u", "admin", "user", "create", "carol", "--password", "Carol-Pass-123", stdin="\n")
    det(c, "-u", "admin", "user", "link-with-agent-user", "carol", "--agent-uid", "65534", "--agent-gid", "65534",
        "--agent-user", "nobody", "--agent-group", "nogroup", stdin="\n")
    det(c, "user", "login", "carol", stdin="Carol-Pass-123\n")
    cfg = tmp_path / "runas.yaml"
    config = steps_config(name="run-as", steps=2)
    config["entrypoint"] = "echo RUNAS $(id -u):$(id -g):$(id -u -n) && python3 train.py"
    cfg.write_text(yaml.safe_dump(config))
    out = det(c, "-u", "carol", "experiment", "create", str(cfg), str(MODELS / "steps"),
              stdin="Carol-Pass-123\n").stdout
    exp_id = int(out.strip().split("Created experiment")[-1].split()[0])
    wait_experiment(c.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR"})
    (trial,) = c.trials(exp_id)
    logs = det(c, "-u", "carol", "trial", "logs", str(trial["id"]), stdin="Carol-Pass-123\n").stdout
    assert "RUNAS 65534:65534:nobody" in logs, logs
