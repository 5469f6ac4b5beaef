"""What the modules of the service kinds (notebook_tasks, shell_tasks, tensorboard_tasks) build on: what a
kind adds at launch, and the argv that starts a service through the launcher in the task's context.
Apart from task_kinds.py, which imports those modules, so that no import cycle runs through them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LAUNCHER_PATH = ".pedl/service_launcher.py"
PORTS_PATH = ".pedl/pedl_ports.py"  # pedl/common/ports.py, which the launcher picks its port with


@dataclass(frozen=True)
class Prepared:
    """What a kind adds to a task at launch: a TensorBoard's experiments and trials (and its files), a
    shell's keys."""

    experiment_ids: tuple[int, ...] = ()
    trial_ids: tuple[int, ...] = ()
    secrets: dict[str, Any] = field(default_factory=dict)
    files: tuple[dict[str, Any], ...] = ()  # added to the task's context (Determined's v1File shape)
    config: dict[str, Any] = field(default_factory=dict)  # top-level keys of the task's config, replaced


def launched(options: list[str], argv: list[str]) -> list[str]:
    return ["python3", LAUNCHER_PATH, *options, "--", *argv]
