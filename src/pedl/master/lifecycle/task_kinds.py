"""What differs between a command, a notebook, a shell and a TensorBoard: the slots one takes when its
config names none, its description, what it is started with, and when it is ready.

A command runs its entrypoint and is ready when it runs. The others are services: the master starts
them through .pedl/service_launcher.py (pedl/launch/service_launcher.py, shipped in the task's
context), which picks a free port, waits until the service answers and then registers the port
(POST /api/v1/allocations/{id}/proxy_port); such a task is ready once its port is registered, and
reached only through the master's proxy at /proxy/{task_id}/."""

from __future__ import annotations

import base64
import hashlib
from importlib import resources
from typing import Any

from sqlalchemy.orm import Session

from pedl.config.task_config import TaskConfig
from pedl.master.db import models
from pedl.master.lifecycle import checkpoint_gc_task_rows
from pedl.master.lifecycle.states import AllocationState
from pedl.master.lifecycle.task_kind_parts import LAUNCHER_PATH, PORTS_PATH, Prepared

SERVICES = ("notebook", "shell", "tensorboard")
NAMES = {
    "command": "Command",
    "notebook": "JupyterLab",
    "shell": "Shell",
    "tensorboard": "TensorBoard",
    "checkpoint_gc": "Checkpoint GC",
}
CHECKPOINT_GC = "checkpoint_gc"  # the master's own (checkpoints/gc_tasks.py): no user route launches one
# Determined's docker-style names: "Command (mildly-brave-owl)"
_ADVERBS = (
    "quietly",
    "gladly",
    "mildly",
    "briskly",
    "boldly",
    "calmly",
    "deftly",
    "gently",
    "keenly",
    "neatly",
    "openly",
    "truly",
    "warmly",
    "wisely",
    "freely",
    "simply",
)
_ADJECTIVES = (
    "amber",
    "brave",
    "civil",
    "eager",
    "fluent",
    "golden",
    "humble",
    "ideal",
    "jolly",
    "lucid",
    "mellow",
    "noble",
    "polite",
    "rapid",
    "steady",
    "vivid",
)
_NOUNS = (
    "owl",
    "lynx",
    "heron",
    "otter",
    "finch",
    "bison",
    "koala",
    "marten",
    "ibex",
    "wren",
    "gecko",
    "panda",
    "raven",
    "tapir",
    "yak",
    "zebu",
)


def default_slots(kind: str) -> int:
    return 0 if kind == "tensorboard" else 1


def petname(task_id: str) -> str:
    digest = hashlib.sha256(task_id.encode()).digest()
    return "-".join(words[b % len(words)] for words, b in zip((_ADVERBS, _ADJECTIVES, _NOUNS), digest, strict=False))


def default_description(kind: str, task_id: str, prepared: Prepared) -> str:
    if kind == "tensorboard" and prepared.experiment_ids:
        return f"TensorBoard (Experiment {', '.join(map(str, prepared.experiment_ids))})"
    if kind == "tensorboard" and prepared.trial_ids:
        return f"TensorBoard (Trial {', '.join(map(str, prepared.trial_ids))})"
    return f"{NAMES[kind]} ({petname(task_id)})"


def prepare(
    kind: str,
    s: Session,
    owner: models.User,
    cfg: TaskConfig,
    experiment_ids: tuple[int, ...],
    trial_ids: tuple[int, ...],
) -> Prepared:
    """Checks and additions of the kind, in the launch's transaction (problems name their field)."""
    module = _module(kind)
    if module is not None and hasattr(module, "prepare"):
        return module.prepare(s, owner, cfg, experiment_ids, trial_ids)
    return Prepared(tuple(experiment_ids), tuple(trial_ids))


def _module(kind: str) -> Any:
    """The module of a service kind (notebook_tasks, shell_tasks, tensorboard_tasks); None: a command."""
    from pedl.master.lifecycle import notebook_tasks, shell_tasks, tensorboard_tasks  # they import this module

    return {"notebook": notebook_tasks, "shell": shell_tasks, "tensorboard": tensorboard_tasks}.get(kind)


def is_ready(kind: str, alloc: models.Allocation | None) -> bool:
    if alloc is None or alloc.state != AllocationState.RUNNING:
        return False
    return kind not in SERVICES or alloc.proxy_port is not None


def service_address(kind: str, task_id: str) -> str | None:
    """Where the service is reached through the master (Determined's serviceAddress)."""
    return f"/proxy/{task_id}/" if kind in ("notebook", "tensorboard") else None


def proxied_as_tcp(kind: str) -> bool:
    """A shell's sshd is a TCP stream: the proxy bridges a WebSocket to it (det's ssh tunnel)."""
    return kind == "shell"


def context_files(kind: str) -> list[dict[str, Any]]:
    """Files the master adds to a task's context (Determined's v1File shape): the service launcher, the
    port picker it imports from beside it, and the kind's own (a shell's sshd runner)."""
    if kind not in SERVICES:
        return []
    launcher = resources.files("pedl.launch").joinpath("service_launcher.py").read_bytes()
    ports = resources.files("pedl.common").joinpath("ports.py").read_bytes()
    module = _module(kind)
    own = module.context_files() if hasattr(module, "context_files") else []
    return [
        {"path": ".pedl", "type": 53, "mode": 0o755},
        {"path": LAUNCHER_PATH, "type": 48, "mode": 0o644, "content": base64.b64encode(launcher).decode()},
        {"path": PORTS_PATH, "type": 48, "mode": 0o644, "content": base64.b64encode(ports).decode()},
        *own,
    ]


def entrypoint(task: Any) -> str | list[str]:
    """What the task's process runs (`task`: a GenericTask or a row with id, kind and config)."""
    if task.kind == CHECKPOINT_GC:
        return checkpoint_gc_task_rows.entrypoint()
    if task.kind == "command":
        argv = task.config.get("entrypoint") or []
        # one word is shell text, as Determined runs `det cmd run 'env | grep X'`; several are an argv
        # (`det cmd run bash -c 'SCRIPT'` keeps its script whole)
        return argv[0] if isinstance(argv, list) and len(argv) == 1 else argv
    return _module(task.kind).entrypoint(task)


def environment(task: Any) -> dict[str, str]:
    """Variables the kind adds to its task's environment."""
    module = _module(task.kind)
    return module.environment(task) if module is not None and hasattr(module, "environment") else {}


def proxy_headers(task: Any) -> list[tuple[str, str]]:
    """Headers the master's proxy adds to what it relays to the task's service (a notebook's token)."""
    module = _module(task.kind)
    return module.proxy_headers(task) if module is not None and hasattr(module, "proxy_headers") else []
