"""Tasks of different users on one (root) agent, on real processes: bob's task runs as a uid other than
alice's, cannot see her task's processes (so not her /proc/<pid>/environ and its tokens), and cannot read
her task directory or her task info files (her session token), as a process and in a container. His
bind mount of a directory only root may read is refused, naming it; a mountpoint that does not exist is
made in his task's view only, never on the host."""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pedl.devcluster import wait_for
from tests.e2e.conftest import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent changes users")]

# bob's probe: what his task can learn of alice's (its argv: her secret, her task directory, her info dir)
PROBE = r"""
import json, os, sys
secret, task_dir, info_dir = sys.argv[1:4]
pids = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
found = []
for pid in pids:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            if secret.encode() in f.read():
                found.append(pid)
    except OSError:
        pass
def attempt(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError as exc:
        return type(exc).__name__
print("PROBE " + json.dumps({"uid": os.getuid(), "pids": pids, "found": found,
                             "task_file": attempt(os.path.join(task_dir, "mine.txt")),
                             "task_listing": attempt(task_dir),
                             "token": attempt(os.path.join(info_dir, "cluster.json"))}), flush=True)
"""
ALICE = 'echo "uid $(id -u)"; echo "tmpdir ${TMPDIR:-/tmp}"; echo "$SECRET" > mine.txt; echo ready; sleep 600'


@pytest.fixture
def work() -> Iterator[Path]:
    """The cluster's directory, one every user may enter (pytest's are root's alone), so that only the
    modes of the task's own directories keep bob out."""
    path = Path(tempfile.mkdtemp(prefix="pedl-isolation-", dir="/tmp"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def token(c: Cluster, username: str) -> dict[str, str]:
    r = httpx.post(
        f"{c.master.url}/api/v1/auth/login",
        content=json.dumps({"username": username, "password": "", "isHashed": False}),
    )
    r.raise_for_status()
    return {"Authorization": f"Bearer {r.json()['token']}"}


def login(c: Cluster, username: str) -> dict[str, str]:
    """A new user's headers (no agent user group: their tasks run as a uid of their own)."""
    body = {"user": {"username": username, "admin": False, "active": True}, "password": "", "isHashed": False}
    r = httpx.post(f"{c.master.url}/api/v1/users", content=json.dumps(body), headers=token(c, "admin"))
    assert r.status_code == 200, r.text
    return token(c, username)


def command(c: Cluster, headers: dict[str, str], config: dict, files: dict[str, str] | None = None) -> str:
    entries = [
        {
            "path": name,
            "type": 48,
            "content": base64.b64encode(text.encode()).decode(),
            "mtime": "1700000000",
            "mode": 33188,
            "uid": 0,
            "gid": 0,
        }
        for name, text in (files or {}).items()
    ]
    body = {"config": {"resources": {"slots": 0}, **config}, "files": entries}
    r = httpx.post(f"{c.master.url}/api/v1/commands", content=json.dumps(body), headers=headers, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()["command"]["id"]


def log(c: Cluster, task_id: str) -> str:
    text = c.master.api("GET", f"/api/v1/tasks/{task_id}/logs", follow="false")
    return "\n".join(json.loads(line)["result"]["log"].rstrip("\n") for line in text.splitlines() if line)


def allocation(c: Cluster, task_id: str) -> dict:
    return c.master.api("GET", f"/api/v1/tasks/{task_id}")["task"]["allocations"][0]


def ended(c: Cluster, task_id: str) -> dict:
    return wait_for(
        lambda: allocation(c, task_id) if allocation(c, task_id)["endTime"] else None,
        240,
        what=f"task {task_id} to end",
    )


def cross_user_probe(c: Cluster, image: dict | None) -> dict[str, str]:
    """Alice's task holds a secret in its environment and its directory; bob's looks for it. Returns bob's
    headers."""
    alice, bob = login(c, "alice"), login(c, "bob")
    secret = secrets.token_urlsafe(24)
    env = {"environment_variables": [f"SECRET={secret}"], **(image or {})}
    hers = command(c, alice, {"entrypoint": ["sh", "-c", ALICE], "environment": env})
    wait_for(lambda: "ready" in log(c, hers), 240, what="alice's task to be ready")
    her_alloc = allocation(c, hers)["allocationId"]
    agent_dir = c.work / "agent-a1"
    task_dir, info_dir = agent_dir / her_alloc, agent_dir / ".det-info" / her_alloc
    assert (task_dir / "mine.txt").read_text().strip() == secret  # where bob will look, seen as root
    mounts = [{"host_path": str(agent_dir), "container_path": str(agent_dir)}] if image else []
    his = command(
        c,
        bob,
        {
            "entrypoint": ["python3", "probe.py", secret, str(task_dir), str(info_dir)],
            "environment": image or {},
            "bind_mounts": mounts,
        },
        files={"probe.py": PROBE},
    )
    done = ended(c, his)
    text = log(c, his)
    assert done["statusCode"] == 0, text
    probe = json.loads(next(line for line in text.splitlines() if "PROBE " in line).split("PROBE ", 1)[1])
    her_uid = int(next(line for line in log(c, hers).splitlines() if line.startswith("uid ")).split()[1])
    assert probe["uid"] != her_uid and 0 not in (probe["uid"], her_uid)
    if image is None:  # a process task's temporary files are its own, in its directory, not in the host's /tmp
        assert "tmpdir /run/determined/workdir/.tmp" in log(c, hers).splitlines()
    assert probe["found"] == [] and max(probe["pids"]) < 20  # only his task's own processes
    assert probe["task_file"] == probe["task_listing"] == probe["token"] == "PermissionError", probe
    assert httpx.post(f"{c.master.url}/api/v1/commands/{hers}/kill", headers=alice).status_code == 200
    ended(c, hers)
    return bob


def test_bobs_process_task_cannot_reach_alices(work: Path) -> None:
    c = Cluster(work, None).start()
    try:
        c.add_agent("a1", slots=2)
        bob = cross_user_probe(c, None)

        # a directory only root may read, mounted by root, was readable through the mount
        closed = work / "root-only"
        closed.mkdir(mode=0o700)
        (closed / "key").write_text("root's key")
        refused = command(
            c,
            bob,
            {
                "entrypoint": ["cat", "/mnt/closed/key"],
                "bind_mounts": [{"host_path": str(closed), "container_path": "/mnt/closed"}],
            },
        )
        assert ended(c, refused)["statusCode"] != 0
        text = log(c, refused)
        assert f"host_path {closed} is not readable by uid" in text and "root's key" not in text

        # a mountpoint that does not exist is made in the task's view, never on the host
        shared = work / "shared"
        shared.mkdir(mode=0o755)
        (shared / "data.txt").write_text("shared data")
        nowhere = f"/pedl-e2e-{secrets.token_hex(4)}"
        made = command(
            c,
            bob,
            {
                "entrypoint": ["cat", f"{nowhere}/in/data.txt"],
                "bind_mounts": [{"host_path": str(shared), "container_path": f"{nowhere}/in"}],
            },
        )
        assert ended(c, made)["statusCode"] == 0, log(c, made)
        assert "shared data" in log(c, made) and not os.path.lexists(nowhere)
    finally:
        c.stop()


def test_bobs_container_cannot_reach_alices(docker_daemon, test_image, work: Path) -> None:
    """In containers, Docker's PID namespace and the users' own uids keep them apart; bob mounts the
    agent's work directory (any host path is allowed here) and still reads none of hers."""
    c = Cluster(work, None).start()
    try:
        c.add_agent("a1", slots=2)
        cross_user_probe(c, {"image": test_image})
    finally:
        c.stop()
