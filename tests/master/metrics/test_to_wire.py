"""A stored report as v1MetricsReport: a validation report's values under validation_metrics, any
other group's under avg_metrics, where Determined's SDK reads them."""

from __future__ import annotations

import pytest

from pedl.master.db import models
from pedl.master.metrics import to_wire


@pytest.mark.parametrize(
    ("group", "key"), [("validation", "validation_metrics"), ("training", "avg_metrics"), ("inference", "avg_metrics")]
)
def test_each_group_puts_its_values_where_the_sdk_reads_them(group: str, key: str) -> None:
    row = models.Metric(
        id=5, trial_id=2, trial_run_id=1, group=group, steps_completed=30, report_time=0.0, metrics={"loss": 0.5}
    )
    assert to_wire.metrics_report(row).model_dump() == {
        "id": "5",
        "trialId": 2,
        "trialRunId": 1,
        "totalBatches": 30,
        "endTime": "1970-01-01T00:00:00Z",
        "metrics": {key: {"loss": 0.5}},
        "group": group,
        "archived": False,
    }
