"""Notebooks: JupyterLab started through the service launcher with its base URL at the master's proxy
path, so every page and kernel WebSocket of it is reached as /proxy/{task_id}/..."""

from __future__ import annotations

from typing import Any

from pedl.master.services.task_launch import launched


def entrypoint(task: Any) -> list[str]:
    return launched(["--http", f"/proxy/{task.id}/api/status"], argv(task.id))


def argv(task_id: str) -> list[str]:
    return ["python3", "-m", "jupyter", "lab", f"--ServerApp.base_url=/proxy/{task_id}/", "--ServerApp.ip=0.0.0.0",
            "--ServerApp.port={port}", "--ServerApp.port_retries=0", "--no-browser", "--allow-root",
            "--IdentityProvider.token=", "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True"]
