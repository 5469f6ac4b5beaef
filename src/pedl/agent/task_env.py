"""The environment and command line of a task process, built from `start_task` and the agent.

Pure functions, so the contract in docs/internals.md ("Agent <-> master") is easy to test. A task
inherits only the agent's variables that `INHERITED` allows, never the rest of its environment (which
may hold secrets, the agent token among them).
"""

from __future__ import annotations

import json
import os
import ssl
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from pedl.agent.task_info import storage_variables
from pedl.common.agent_protocol import SlotInfo, StartTask
from pedl.common.master_trust import DET_MASTER_CERT_ENV, MASTER_CERT_ENV


@dataclass(frozen=True)
class TaskHost:
    """What every task on this agent is told about the agent."""

    master_url: str
    agent_id: str
    work_dir: Path
    slots: Mapping[str, SlotInfo]  # by slot id
    master_cert: Path | None = None  # the CA file the agent verifies the master with; tasks use it too
    ssl_context: ssl.SSLContext | None = None  # how the agent verifies an https:// master
    # why process tasks cannot get Determined's /run/determined/info in a mount namespace of their
    # own (task_namespace.probe()); None: they do
    no_task_namespace: str | None = "not probed"
    no_containers: str | None = "not probed"  # why tasks that name an image cannot run here; None: they can


# the agent's variables a task inherits: the search path, the locale, the time zone, the terminal, the
# temporary directory and HOME (which a task run as another user gets from run_as instead)
INHERITED = frozenset({"PATH", "LANG", "TZ", "TERM", "TMPDIR", "HOME"})
INHERITED_PREFIXES = ("LC_",)


def inherited(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of `environ` a task inherits (INHERITED, and the locale's LC_*)."""
    return {k: v for k, v in environ.items() if k in INHERITED or k.startswith(INHERITED_PREFIXES)}


def task_env(
    spec: StartTask, host: TaskHost, base: Mapping[str, str] | None = None, *, gpu: bool = False
) -> dict[str, str]:
    """The allowed part of the agent's environment (`base`, else os.environ) + the experiment's
    variables of the task's device type + start_task.env + what only the agent knows; the agent's
    values win."""
    env = inherited(os.environ if base is None else base)
    env.update(spec.device_env.get("gpu" if gpu else "cpu", {}))
    env.update(spec.env)
    cuda = [host.slots[s] for s in spec.slot_ids if s in host.slots and host.slots[s].type == "cuda"]
    env.update(
        {
            "DET_MASTER": host.master_url,
            "DET_AGENT_ID": host.agent_id,
            "DET_SLOT_IDS": json.dumps(_slot_id_list(spec.slot_ids)),
            "CUDA_VISIBLE_DEVICES": ",".join(slot.uuid or slot.id for slot in cuda),
        }
    )
    for name, value in storage_variables(env).items():  # Determined's harness reads no region from its config
        env.setdefault(name, value)
    if host.master_cert is not None:
        # pedl.core reads the first, Determined's harness (and det inside a task) the second
        env[MASTER_CERT_ENV] = env[DET_MASTER_CERT_ENV] = str(host.master_cert)
    # the agent's own interpreter first, so `python3` in an entrypoint has pedl installed; a PATH
    # the experiment sets itself (environment_variables) is taken as it is
    if "PATH" not in spec.env:
        bin_dir = os.path.dirname(sys.executable)
        env["PATH"] = os.pathsep.join(p for p in (bin_dir, env.get("PATH", "")) if p)
    # piped Python output is block-buffered by default; users expect their prints to stream
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


CONTEXT_HOOK = "startup-hook.sh"  # Determined's: a file of this name at the top of a task's context


def task_argv(entrypoint: str | list[str], startup_hook: str = "", context_hook: bool = False) -> list[str]:
    """A string runs through the shell; a list is the argv itself. Startup hooks run first, in one shell,
    so what they export reaches the entrypoint: the pool's task_container_defaults.startup_hook, then
    the context's startup-hook.sh (`context_hook`: the task's directory has one), sourced; then the
    entrypoint, exec'd in the shell's place (its pid and signals are the task's, as without hooks)."""
    hooks = [h for h in (startup_hook.strip(), f". ./{CONTEXT_HOOK}" if context_hook else "") if h]
    if isinstance(entrypoint, str):
        return ["/bin/sh", "-c", "\n".join([*hooks, entrypoint])]
    if not hooks:
        return list(entrypoint)
    if not entrypoint:  # a command of no words (Determined launches one): its hooks alone
        return ["/bin/sh", "-c", "\n".join(hooks)]
    return ["/bin/sh", "-c", "\n".join([*hooks, 'exec "$@"']), "pedl-task", *entrypoint]


def _slot_id_list(slot_ids: list[str]) -> list[int] | list[str]:
    # Determined's DET_SLOT_IDS is a JSON list of ints; our ids are "0", "1", ... so keep that shape
    if all(s.isdigit() for s in slot_ids):
        return [int(s) for s in slot_ids]
    return list(slot_ids)
