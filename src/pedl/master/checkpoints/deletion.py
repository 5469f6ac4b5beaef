"""Deleting checkpoints (or some of their files) from storage with no transaction open: each checked
against the master's storage roots just before, one registered as a model version meanwhile kept. Garbage
collection (checkpoints/gc.py), a user's delete or file removal (checkpoints/edits.py) and
TensorBoard file deletion share it."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pedl.common.checkpoint_storage import CheckpointStorage
from pedl.master.checkpoints.storage_roots import StorageRoots, checkpoint_problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Deletion:
    uuid: str
    trial_id: int
    storage: dict[str, Any]  # the experiment's checkpoint_storage section: where the files are
    recorded: dict[str, Any] = field(default_factory=dict)  # the row's storage column (older rows: a request's)


@dataclass
class Outcome:
    deleted: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # uuid -> why; retried
    refused: dict[str, str] = field(default_factory=dict)  # uuid -> why it is outside the roots; left alone


def _delete_all(storage: CheckpointStorage, uuid: str) -> None:
    storage.delete(uuid)


def delete_from_storage(
    deletions: Sequence[Deletion],
    roots: StorageRoots,
    storage_for: Callable[[Mapping[str, Any]], CheckpointStorage],
    outcome: Outcome,
    *,
    registered: Callable[[str], bool],
    act: Callable[[CheckpointStorage, str], None] = _delete_all,
) -> list[Deletion]:
    """`act` (by default: delete the whole checkpoint) on each checkpoint's storage, checked against the
    roots just before (one outside them is left alone, logged, in `outcome.refused`); one `registered`
    as a model version meanwhile is kept; a failure is noted in `outcome.failed`. -> those done."""
    storages: dict[str, CheckpointStorage] = {}
    done = []
    for d in deletions:
        why = checkpoint_problem(d.storage, d.uuid, roots, recorded=d.recorded)
        if why is not None:
            log.warning("checkpoint %s left alone: %s", d.uuid, why)
            outcome.refused[d.uuid] = why
            continue
        if registered(d.uuid):  # registered as a model version since the plan: kept
            continue
        key = json.dumps(d.storage, sort_keys=True, default=str)
        try:
            if key not in storages:
                storages[key] = storage_for(d.storage)
            act(storages[key], d.uuid)
        except Exception as exc:  # report (and retry), whatever the storage raised
            outcome.failed[d.uuid] = getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}"
            continue
        outcome.deleted.append(d.uuid)
        done.append(d)
    return done
