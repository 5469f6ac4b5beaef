"""What a task kind adds to a task at launch (services/task_kinds.py asks the kind's module): a leaf
module, so that the kinds' modules (notebook_tasks, ...) need not import task_kinds, which imports them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Prepared:
    """What a kind adds to a task at launch: a TensorBoard's experiments and trials, a shell's keys,
    a notebook's token."""

    experiment_ids: tuple[int, ...] = ()
    trial_ids: tuple[int, ...] = ()
    secrets: dict[str, Any] = field(default_factory=dict)
