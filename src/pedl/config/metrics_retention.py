"""`metrics_retention`: keeping one in `keep_every` of the training reports older than `older_than`, in
master.yaml (every experiment's default, and how often the master thins) and in an experiment config
(that experiment's own setting, a key of pedl's that Determined's clients pass through untouched)."""

from __future__ import annotations

from pydantic import Field

from pedl.config.durations import Duration
from pedl.config.loading import StrictModel

MAX_KEEP_EVERY = 1_000_000
DEFAULT_INTERVAL = 600.0  # seconds between passes
DEFAULT_OLDER_THAN = 7 * 24 * 3600.0  # an experiment's section without older_than, when the master has none


class MetricsRetentionConfig(StrictModel):
    """master.yaml's section; absent (or keep_every 1), no report is ever deleted."""

    keep_every: int = Field(
        ..., ge=1, le=MAX_KEEP_EVERY, description="keep one training report in this many; 1 keeps them all"
    )
    older_than: Duration = Field(..., gt=0, description="only training reports older than this are thinned")
    interval: Duration = Field(default=DEFAULT_INTERVAL, gt=0, description="time between two thinning passes")


class ExperimentMetricsRetention(StrictModel):
    """An experiment's section: its trials follow it instead of the master's (keep_every 1: keep all)."""

    keep_every: int = Field(
        ..., ge=1, le=MAX_KEEP_EVERY, description="keep one training report in this many; 1 keeps them all"
    )
    older_than: Duration | None = Field(
        default=None, gt=0, description="left out: the master's older_than, or 168h when the master has none"
    )
