"""An experiment's labels as stored in experiments.labels: between unit separators ("\x1fa\x1fb\x1f"),
so that a LIKE pattern matches a whole label (migration 0005)."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import ColumnElement, or_

from pedl.master.db import models

SEP = "\x1f"


def joined(labels: Iterable[str]) -> str:
    kept = list(dict.fromkeys(str(x) for x in labels if SEP not in str(x)))
    return SEP + SEP.join(kept) + SEP if kept else ""


def split(stored: str | None) -> list[str]:
    return [x for x in (stored or "").split(SEP) if x]


def having_any(labels: Iterable[str]) -> ColumnElement[bool]:
    """Experiments that carry at least one of `labels`."""
    return or_(*(models.Experiment.labels.contains(SEP + label + SEP, autoescape=True) for label in labels))
