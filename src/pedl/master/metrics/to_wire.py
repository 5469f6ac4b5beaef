"""Stored metric reports as Determined's v1MetricsReport."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.wire.base import ts
from pedl.master.wire.metrics import MetricsReport

if TYPE_CHECKING:
    from pedl.master.db import models


def metrics_report(m: models.Metric) -> MetricsReport:
    key = "validation_metrics" if m.group == "validation" else "avg_metrics"
    return MetricsReport(
        id=str(m.id),
        trialId=m.trial_id,
        trialRunId=m.trial_run_id,
        totalBatches=m.steps_completed,
        endTime=ts(m.report_time),
        metrics={key: m.metrics},
        group=m.group,
        archived=False,
    )
