"""Shells on real processes: a master, a local agent and the shell's own sshd, opened with ssh through
the master's proxy (a WebSocket tunnel bridged to sshd's TCP port) with the shell's key; a wrong key
is refused by sshd, and another user does not get through the proxy at all."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from pedl.devcluster import wait_for
from pedl.launch.shell_sshd import find_sshd
from pedl.master.lifecycle.shell_tasks import key_pair

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).parents[2]


def require_openssh() -> None:
    if find_sshd() is None or shutil.which("ssh") is None:
        message = "OpenSSH is missing (apt-get install openssh-server openssh-client; make test installs it)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)


def _login(url: str, username: str, password: str = "") -> str:
    r = httpx.post(
        f"{url}/api/v1/auth/login", content=json.dumps({"username": username, "password": password, "isHashed": False})
    )
    r.raise_for_status()
    return r.json()["token"]


def ssh(
    url: str, shell_id: str, user: str, key: str, command: str, work: Path, token: str = ""
) -> subprocess.CompletedProcess:
    key_file = work / f"key-{abs(hash(key))}"
    key_file.write_text(key)
    key_file.chmod(0o600)
    ws = url.replace("http://", "ws://") + f"/proxy/{shell_id}/"
    tunnel = f"{sys.executable} -m tests.support.ssh_tunnel {ws} {token}".strip()
    # -tt: a terminal, as det shell open always asks for one
    argv = [
        "ssh",
        "-tt",
        "-F",
        "/dev/null",
        "-o",
        f"ProxyCommand={tunnel}",
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
        "-i",
        str(key_file),
        f"{user}@{shell_id}",
        command,
    ]
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, cwd=ROOT, env=env)


def _logs(c, task_id: str) -> str:
    text = c.master.api("GET", f"/api/v1/tasks/{task_id}/logs", follow="false")
    return "".join(json.loads(line)["result"]["message"] for line in text.splitlines() if line)


def test_a_shell_opens_over_ssh_through_the_master_with_its_key_only(cluster, tmp_path) -> None:
    require_openssh()
    c = cluster
    c.add_agent("a1")
    shell = c.master.api("POST", "/api/v1/shells", {})["shell"]
    sid = shell["id"]
    me = shell["agentUserGroup"]["user"]  # the user det logs in as
    assert me == "pedl-user-determined"  # no agent user group: a uid of the user's own
    assert shell["privateKey"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    assert shell["publicKey"].startswith("ssh-ed25519 ")
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/tasks/{sid}")["task"]["allocations"][0]["isReady"],
        90,
        what="the shell's sshd to listen",
    )
    assert "Server listening on" in _logs(c, sid)

    out = ssh(c.master.url, sid, me, shell["privateKey"], "echo hi $(id -un) $DET_TASK_ID", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hi", me, sid]

    # a key of another shell is refused by sshd, after the proxy let the tunnel through
    wrong, _ = key_pair()
    out = ssh(c.master.url, sid, me, wrong, "echo hi", tmp_path)
    assert out.returncode == 255 and "Permission denied (publickey)" in out.stderr, out.stderr

    # the proxy: the owner's token passes too; another user's is the answer of an unknown task; plain HTTP
    # to a shell is refused saying how it is reached
    out = ssh(c.master.url, sid, me, shell["privateKey"], "echo owner", tmp_path, token=c.master.token())
    assert out.returncode == 0 and out.stdout.strip() == "owner", out.stderr
    admin = _login(c.master.url, "admin")
    body = {"user": {"username": "bob", "admin": False, "active": True}, "password": "", "isHashed": False}
    httpx.post(
        f"{c.master.url}/api/v1/users", content=json.dumps(body), headers={"Authorization": f"Bearer {admin}"}
    ).raise_for_status()
    bob = _login(c.master.url, "bob")
    out = ssh(c.master.url, sid, me, shell["privateKey"], "echo bob", tmp_path, token=bob)
    assert out.returncode != 0 and "tunnel refused: HTTP 404" in out.stderr, out.stderr
    bobs_view = httpx.get(f"{c.master.url}/api/v1/shells/{sid}", headers={"Authorization": f"Bearer {bob}"})
    assert "privateKey" not in bobs_view.json()["shell"]

    async def handshake(token: str) -> int:
        try:
            async with connect(
                c.master.url.replace("http://", "ws://") + f"/proxy/{sid}/",
                additional_headers={"Authorization": f"Bearer {token}"},
            ):
                return 101
        except InvalidStatus as exc:
            return exc.response.status_code

    assert asyncio.run(handshake(bob)) == 404
    r = httpx.get(f"{c.master.url}/proxy/{sid}/", headers={"Authorization": f"Bearer {c.master.token()}"})
    assert r.status_code == 400 and "WebSocket tunnel" in r.json()["message"]

    c.master.api("POST", f"/api/v1/shells/{sid}/kill")
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/shells/{sid}")["shell"]["state"] == "STATE_TERMINATED",
        60,
        what="the shell to end",
    )
    out = ssh(c.master.url, sid, me, shell["privateKey"], "echo hi", tmp_path)
    assert out.returncode != 0 and "tunnel refused: HTTP 404" in out.stderr, out.stderr


def _login_account() -> pwd.struct_passwd | None:
    """A non-root account of this host with a login shell (PostgreSQL's, a developer's): nobody and
    root are no use, as systemd's NSS module reports both locked, which sshd refuses without PAM."""
    for entry in sorted(pwd.getpwall(), key=lambda e: e.pw_uid):
        if 100 <= entry.pw_uid < 65534 and entry.pw_shell.endswith(("/sh", "/bash")) and os.path.exists(entry.pw_shell):
            return entry
    return None


@pytest.mark.skipif(os.geteuid() != 0, reason="only a root agent runs tasks as another user")
def test_a_linked_users_shell_runs_sshd_as_that_user(cluster, tmp_path) -> None:
    """Not root: sshd runs as the owner's agent user and takes the shell's key for that user only."""
    require_openssh()
    account = _login_account()
    if account is None:
        pytest.skip("this host has no non-root account with a login shell to run the shell as")
    c = cluster
    c.add_agent("a1")
    admin = {"Authorization": f"Bearer {_login(c.master.url, 'admin')}"}
    group = {
        "agentUid": account.pw_uid,
        "agentGid": account.pw_gid,
        "agentUser": account.pw_name,
        "agentGroup": "staff",
    }
    body = {
        "user": {"username": "carol", "admin": False, "active": True, "agentUserGroup": group},
        "password": "",
        "isHashed": False,
    }
    httpx.post(f"{c.master.url}/api/v1/users", content=json.dumps(body), headers=admin).raise_for_status()
    carol = {"Authorization": f"Bearer {_login(c.master.url, 'carol')}"}
    r = httpx.post(f"{c.master.url}/api/v1/shells", content="{}", headers=carol)
    r.raise_for_status()
    shell = r.json()["shell"]
    sid = shell["id"]
    assert shell["agentUserGroup"]["user"] == account.pw_name
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/tasks/{sid}")["task"]["allocations"][0]["isReady"],
        90,
        what="the shell's sshd to listen",
    )
    logs = _logs(c, sid)
    assert f"sshd accepts the shell's key for user {account.pw_name}" in logs and "Server listening on" in logs, logs

    out = ssh(c.master.url, sid, account.pw_name, shell["privateKey"], "echo hi $(id -u) $DET_TASK_ID", tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["hi", str(account.pw_uid), sid]
    wrong, _ = key_pair()
    out = ssh(c.master.url, sid, account.pw_name, wrong, "echo hi", tmp_path)
    assert out.returncode == 255 and "Permission denied (publickey)" in out.stderr, out.stderr
    out = ssh(c.master.url, sid, "root", shell["privateKey"], "echo hi", tmp_path)  # the key, another user
    assert out.returncode == 255 and "Permission denied (publickey)" in out.stderr, out.stderr
