"""Shells: sshd as the task's user, started through the service launcher (pedl/launch/shell_sshd.py),
opened with a key pair made for the shell at launch, whose private half only the owner or an admin
reads. det shell open runs ssh through the master: a WebSocket to /proxy/{task_id}/ bridged to sshd's
TCP port (api/proxy_tcp.py)."""

from __future__ import annotations

import base64
from importlib import resources
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from sqlalchemy.orm import Session

from pedl.common.agent_protocol import AgentUserGroup
from pedl.config.task_config import TaskConfig
from pedl.launch.shell_sshd import PUBLIC_KEY_VAR
from pedl.master.db import models
from pedl.master.lifecycle.task_kind_parts import Prepared, launched

SSHD_PATH = ".pedl/shell_sshd.py"
# who a task runs as when neither its owner's agent user group nor security.default_task says: the
# agent's own user, root for an agent running as root (Determined's default too)
AGENT_DEFAULT = AgentUserGroup(uid=0, gid=0, user="root", group="root")


def key_pair() -> tuple[str, str]:
    """(private key in OpenSSH's format, public key line): ed25519, which every OpenSSH since 6.5 takes."""
    key = ed25519.Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH, serialization.NoEncryption()
    ).decode()
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return private, public.decode() + " pedl-shell"


def prepare(
    s: Session, owner: models.User, cfg: TaskConfig, experiment_ids: tuple[int, ...], trial_ids: tuple[int, ...]
) -> Prepared:
    private, public = key_pair()
    return Prepared(secrets={"private_key": private, "public_key": public})


def entrypoint(task: Any) -> list[str]:
    return launched([], ["python3", SSHD_PATH, "{port}"])


def environment(task: Any) -> dict[str, str]:
    return {PUBLIC_KEY_VAR: (task.secrets or {}).get("public_key", "")}


def context_files() -> list[dict[str, Any]]:
    source = resources.files("pedl.launch").joinpath("shell_sshd.py").read_bytes()
    return [{"path": SSHD_PATH, "type": 48, "mode": 0o644, "content": base64.b64encode(source).decode()}]


def login_user(run_as: AgentUserGroup | None) -> dict[str, Any]:
    """Determined's agentUserGroup of a shell (det ssh's in as its `user`): who the task runs as."""
    group = run_as or AGENT_DEFAULT
    return {"uid": group.uid, "gid": group.gid, "user": group.user, "group": group.group}
