"""What the owner of an experiment (or an admin) may change besides its state: archive it once it has
ended, unarchive it, and edit its name, description, notes and labels."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.errors import Conflict, InvalidArgument
from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.lifecycle import TERMINAL_EXPERIMENT
from pedl.master.services.authz import require_owner
from pedl.master.services.experiment_labels import SEP, joined
from pedl.master.services.experiments import get
from pedl.master.services.transitions import record_event

if TYPE_CHECKING:
    from pedl.master.context import MasterContext

NAME_MAX = 512  # the column's length
TEXT_MAX = 65_536
LABEL_MAX = 255
LABELS_MAX = 100


def set_archived(ctx: MasterContext, who: Caller, experiment_id: int, archived: bool) -> models.Experiment:
    verb = "archive" if archived else "unarchive"
    with ctx.db.session() as s:
        exp = get(s, experiment_id)
        require_owner(who, exp.owner_id, f"{verb} experiment {experiment_id}")
        if archived and exp.state not in TERMINAL_EXPERIMENT:
            raise Conflict(f"experiment {experiment_id} is {exp.state.removeprefix('STATE_')}: only an experiment "
                           "that has ended (COMPLETED, CANCELED or ERROR) can be archived")
        if exp.archived != archived:
            exp.archived = archived
            record_event(s, ctx.clock.now(), "experiment", exp.id, f"{verb}d by {who.user.username}")
        return exp



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


def edit(ctx: MasterContext, who: Caller, experiment_id: int, *, name: str | None = None,
         description: str | None = None, notes: str | None = None,
         labels: list[str] | None = None) -> models.Experiment:
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
