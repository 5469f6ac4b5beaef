"""v1MetricsReport: one stored report as Determined's SDK streams them (trial.iter_metrics, a
checkpoint's or model version's metrics)."""

from __future__ import annotations

from typing import Any

from pedl.master.wire.base import WireModel


class MetricsReport(WireModel):
    """A validation report's values are under `metrics.validation_metrics`, any other group's under
    `metrics.avg_metrics`: the SDK reads them there."""

    id: str
    trialId: int
    trialRunId: int
    totalBatches: int
    endTime: str | None
    metrics: dict[str, Any]
    group: str
    archived: bool
