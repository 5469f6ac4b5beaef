"""What the owner of an experiment (or an admin) may change besides its state: archive it once it has
ended, unarchive it, edit its name, description, notes and labels, add or remove one label, and change
its priority, fair-share weight and max_slots."""

from __future__ import annotations

import math
from types import EllipsisType
from typing import TYPE_CHECKING

from sqlalchemy import select
from sqlalchemy.orm import Session

from pedl.errors import Conflict, InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.labels import SEP, joined
from pedl.master.experiments.service import get
from pedl.master.identity.authz import require_owner
from pedl.master.lifecycle.states import TERMINAL_EXPERIMENT, AllocationState
from pedl.master.lifecycle.transitions import record_event

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

NAME_MAX = 512  # the column's length
TEXT_MAX = 65_536
LABEL_MAX = 255
LABELS_MAX = 100
MAX_SLOTS_MAX = 1_000_000  # as the config's resources.max_slots


def set_archived(ctx: MasterContext, who: Caller, experiment_id: int, archived: bool) -> None:
    verb = "archive" if archived else "unarchive"
    with ctx.db.session() as s:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"{verb} experiment {experiment_id}")
        if archived and exp.state not in TERMINAL_EXPERIMENT:
            raise Conflict(
                f"experiment {experiment_id} is {exp.state.removeprefix('STATE_')}: only an experiment "
                "that has ended (COMPLETED, CANCELED or ERROR) can be archived"
            )
        if exp.archived != archived:
            exp.archived = archived
            record_event(s, ctx.clock.now(), "experiment", exp.id, f"{verb}d by {who.user.username}")


def _text(name: str, value: str, limit: int) -> str:
    if len(value) > limit:
        raise InvalidArgument.at(name, f"at most {limit} characters")
    return value


def _labels(labels: list[str]) -> list[str]:
    if len(labels) > LABELS_MAX:
        raise InvalidArgument.at("labels", f"at most {LABELS_MAX} labels")
    for i, label in enumerate(labels):
        if not label.strip() or len(label) > LABEL_MAX or SEP in label or any(c in label for c in "\r\n"):
            raise InvalidArgument.at(f"labels[{i}]", f"a label is 1 to {LABEL_MAX} characters on one line")
    return list(dict.fromkeys(labels))


def edit(
    ctx: MasterContext,
    who: Caller,
    experiment_id: int,
    *,
    name: str | None = None,
    description: str | None = None,
    notes: str | None = None,
    labels: list[str] | None = None,
) -> models.Experiment:
    """Change what is given (None: unchanged); the config keeps its own copy of name, description and
    labels in step, as `det e describe` shows them."""
    if name is not None and not _text("name", name, NAME_MAX).strip():
        raise InvalidArgument.at("name", "must not be empty")
    for field, value in (("description", description), ("notes", notes)):
        if value is not None:
            _text(field, value, TEXT_MAX)
    kept = _labels(labels) if labels is not None else None
    with ctx.db.session() as s:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"edit experiment {experiment_id}")
        config = dict(exp.config)
        if name is not None:
            exp.name = config["name"] = name
        if description is not None:
            exp.description = config["description"] = description
        if notes is not None:
            exp.notes = notes
        if kept is not None:
            exp.labels = joined(kept)
            config["labels"] = kept
        exp.config = config
        return exp


def change_label(ctx: MasterContext, who: Caller, experiment_id: int, label: str, present: bool) -> list[str]:
    """Add (present) or remove one label; -> the labels after. Adding one it has, or removing one it
    lacks, changes nothing."""
    [label] = _labels([label])
    with ctx.db.session() as s:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"edit experiment {experiment_id}")
        labels = [x for x in (exp.config.get("labels") or []) if isinstance(x, str)]
        if present:
            kept = labels if label in labels else _labels([*labels, label])
        else:
            kept = [x for x in labels if x != label]
        if kept != labels:
            exp.labels = joined(kept)
            exp.config = {**exp.config, "labels": kept}
        return kept


def _set_resources(
    ctx: MasterContext,
    who: Caller,
    experiment_id: int,
    *,
    priority: int | None,
    weight: float | None,
    max_slots: int | None | EllipsisType = ...,
) -> None:
    """Change the experiment's priority (its trials' waiting and running allocations take it at once:
    the scheduler's next pass orders and preempts by it), fair-share weight (read by every pass) and
    max_slots (None: no cap; ...: unchanged), which the next pass applies: running trials keep their
    slots, new ones wait while the experiment holds max_slots. Runs under the cluster lock, so no pass
    sees half of it. The values are patch's, checked."""

    def change(s: Session) -> None:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"edit experiment {experiment_id}")
        resources = dict(exp.config.get("resources") or {})
        if max_slots is not ...:
            resources["max_slots"] = max_slots
        if priority is not None:
            resources["priority"] = priority
            live = (
                select(models.Allocation)
                .join(models.Trial, models.Trial.id == models.Allocation.trial_id)
                .where(
                    models.Trial.experiment_id == experiment_id, models.Allocation.state != AllocationState.TERMINATED
                )
            )
            for alloc in s.scalars(live):
                alloc.priority = priority
        if weight is not None:
            resources["weight"] = weight
        exp.config = {**exp.config, "resources": resources}
        changes = [f"{k} {v}" for k, v in (("priority", priority), ("weight", weight)) if v is not None]
        if max_slots is not ...:
            changes.append(f"max_slots {'none' if max_slots is None else max_slots}")
        record_event(s, ctx.clock.now(), "experiment", exp.id, f"{', '.join(changes)} set by {who.user.username}")

    ctx.controller.run(change)
    ctx.controller.wake()


def _check_resources(priority: int | None, weight: float | None, max_slots: int | None | EllipsisType) -> None:
    if priority is not None and not 1 <= priority <= 99:
        raise InvalidArgument.at("resources.priority", "from 1 (most urgent) to 99")
    if weight is not None and not (0 < weight <= 1_000_000 and math.isfinite(weight)):
        raise InvalidArgument.at("resources.weight", "greater than 0 and at most 1000000")
    if isinstance(max_slots, int) and not 0 <= max_slots <= MAX_SLOTS_MAX:
        raise InvalidArgument.at("resources.maxSlots", f"from 0 to {MAX_SLOTS_MAX}, or null for no cap")


def _check_max_slots_fits(ctx: MasterContext, experiment_id: int, max_slots: int) -> None:
    """A cap below one trial's slots would keep every trial waiting for ever."""
    with ctx.db.read_session() as s:
        need = int((get(s, experiment_id).config.get("resources") or {}).get("slots_per_trial", 1))
    if max_slots < need:
        raise InvalidArgument.at(
            "resources.maxSlots",
            f"{max_slots} is less than the {need} slot(s) each trial of "
            f"experiment {experiment_id} needs (resources.slots_per_trial)",
        )


def patch(
    ctx: MasterContext,
    who: Caller,
    experiment_id: int,
    *,
    name: str | None = None,
    description: str | None = None,
    notes: str | None = None,
    labels: list[str] | None = None,
    priority: int | None = None,
    weight: float | None = None,
    max_slots: int | None | EllipsisType = ...,
) -> None:
    """PATCH /experiments/{id}: every value checked before anything changes. `max_slots` None removes
    the cap (det sends null for `det e set max-slots ID None`); ... leaves it as it is."""
    _check_resources(priority, weight, max_slots)
    if isinstance(max_slots, int):
        _check_max_slots_fits(ctx, experiment_id, max_slots)
    edit(ctx, who, experiment_id, name=name, description=description, notes=notes, labels=labels)
    if priority is not None or weight is not None or max_slots is not ...:
        _set_resources(ctx, who, experiment_id, priority=priority, weight=weight, max_slots=max_slots)
