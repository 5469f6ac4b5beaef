"""Shells' launch (lifecycle/shell_tasks.py): a fresh key pair each, the private half in OpenSSH's
format matching the public line; sshd started through the launcher; who det ssh's in as."""

from __future__ import annotations

import base64
from types import SimpleNamespace

from cryptography.hazmat.primitives import serialization

from pedl.common.agent_protocol import AgentUserGroup
from pedl.launch.shell_sshd import PUBLIC_KEY_VAR
from pedl.master.lifecycle import shell_tasks, task_kinds


def test_each_shell_gets_its_own_key_pair_whose_halves_match() -> None:
    first = shell_tasks.prepare(None, None, None, (), ()).secrets  # type: ignore[arg-type]
    second = shell_tasks.prepare(None, None, None, (), ()).secrets  # type: ignore[arg-type]
    assert first["private_key"] != second["private_key"]
    assert first["private_key"].startswith("-----BEGIN OPENSSH PRIVATE KEY-----")
    key = serialization.load_ssh_private_key(first["private_key"].encode(), password=None)
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    assert first["public_key"] == public.decode() + " pedl-shell"


def test_sshd_runs_under_the_launcher_with_the_public_key_in_its_environment() -> None:
    task = SimpleNamespace(
        id="t", kind="shell", config={}, secrets={"public_key": "ssh-ed25519 AAA pedl-shell", "private_key": "secret"}
    )
    assert task_kinds.entrypoint(task) == [
        "python3",
        ".pedl/service_launcher.py",
        "--",
        "python3",
        ".pedl/shell_sshd.py",
        "{port}",
    ]
    assert task_kinds.environment(task) == {PUBLIC_KEY_VAR: "ssh-ed25519 AAA pedl-shell"}
    files = {f["path"]: f for f in task_kinds.context_files("shell")}
    assert b"def sshd_config" in base64.b64decode(files[".pedl/shell_sshd.py"]["content"])
    assert ".pedl/shell_sshd.py" not in {f["path"] for f in task_kinds.context_files("notebook")}
    assert task_kinds.proxied_as_tcp("shell") and not task_kinds.proxied_as_tcp("notebook")


def test_det_logs_in_as_the_user_the_task_runs_as() -> None:
    assert shell_tasks.login_user(None) == {"uid": 0, "gid": 0, "user": "root", "group": "root"}
    group = AgentUserGroup(uid=1001, gid=1002, user="alice", group="staff")
    assert shell_tasks.login_user(group) == {"uid": 1001, "gid": 1002, "user": "alice", "group": "staff"}
