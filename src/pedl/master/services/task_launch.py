"""What a service kind's module (notebook_tasks, shell_tasks, tensorboard_tasks) builds its task with:
the additions it makes at launch, and its argv under the service launcher. Apart from task_kinds.py,
which dispatches to those modules, so that they need not import it back."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LAUNCHER_PATH = ".pedl/service_launcher.py"


@dataclass(frozen=True)
class Prepared:
    """What a kind adds to a task at launch: a TensorBoard's experiments and trials, a shell's keys."""

    experiment_ids: tuple[int, ...] = ()
    trial_ids: tuple[int, ...] = ()
    secrets: dict[str, Any] = field(default_factory=dict)


def launched(options: list[str], argv: list[str]) -> list[str]:
    return ["python3", LAUNCHER_PATH, *options, "--", *argv]
