"""Notebooks: JupyterLab started through .pedl/notebook_launcher.py (the service launcher and an
activity watcher) with its base URL at the master's proxy path, so every page and kernel WebSocket
of it is reached as /proxy/{task_id}/...

Jupyter takes a random token of the task's own (made at launch, kept in the task's secrets, given to
the task as JUPYTER_TOKEN): whoever reaches the agent's port directly gets nothing, and the master's
proxy adds `Authorization: token ...` to what it relays (proxy_headers)."""

from __future__ import annotations

import base64
import secrets
from importlib import resources
from typing import Any

from sqlalchemy.orm import Session

from pedl.config.durations import parse_duration
from pedl.config.task_config import TaskConfig
from pedl.master.db import models
from pedl.master.lifecycle.task_kind_parts import Prepared

NOTEBOOK_LAUNCHER = ".pedl/notebook_launcher.py"
TOKEN_KEY = "jupyter_token"
MAX_REPORT_SECONDS = 30.0  # how often, at most, the watcher asks Jupyter whether it is in use
MIN_REPORT_SECONDS = 1.0


def prepare(
    s: Session, owner: models.User, cfg: TaskConfig, experiment_ids: tuple[int, ...], trial_ids: tuple[int, ...]
) -> Prepared:
    return Prepared(secrets={TOKEN_KEY: secrets.token_urlsafe(32)})


def entrypoint(task: Any) -> list[str]:
    return ["python3", NOTEBOOK_LAUNCHER, "--http", f"/proxy/{task.id}/api/status", "--", *argv(task.id)]


def argv(task_id: str) -> list[str]:
    # the token comes from JUPYTER_TOKEN (never in argv, which anyone on the host can read), and
    # Jupyter prints it as "..." in the line "Jupyter Server ... is running at"
    return [
        "python3",
        "-m",
        "jupyter",
        "lab",
        f"--ServerApp.base_url=/proxy/{task_id}/",
        "--ServerApp.ip=0.0.0.0",
        "--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        "--no-browser",
        "--allow-root",
        "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True",
    ]


def token_of(task: Any) -> str | None:
    return (task.secrets or {}).get(TOKEN_KEY) or None


def report_seconds(idle_timeout: float) -> float:
    """How often the watcher looks: a few times per idle_timeout, so that a notebook in use is never
    taken for idle between two looks."""
    return max(MIN_REPORT_SECONDS, min(MAX_REPORT_SECONDS, idle_timeout / 4))


def environment(task: Any) -> dict[str, str]:
    env: dict[str, str] = {}
    token = token_of(task)
    if token:
        env["JUPYTER_TOKEN"] = token
    idle = (task.config or {}).get("idle_timeout")
    if idle:
        env["PEDL_ACTIVITY_REPORT_SECONDS"] = f"{report_seconds(parse_duration(idle)):g}"
        env["PEDL_NOTEBOOK_IDLE_TYPE"] = str((task.config or {}).get("notebook_idle_type") or "kernels_or_terminals")
    return env


def proxy_headers(task: Any) -> list[tuple[str, str]]:
    """What the master's proxy adds to every request it relays to the notebook (HTTP and WebSocket)."""
    token = token_of(task)
    return [("authorization", f"token {token}")] if token else []


def context_files() -> list[dict[str, Any]]:
    source = resources.files("pedl.launch").joinpath("notebook_launcher.py").read_bytes()
    return [{"path": NOTEBOOK_LAUNCHER, "type": 48, "mode": 0o644, "content": base64.b64encode(source).decode()}]
