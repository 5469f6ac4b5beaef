"""v1MetricsReport refuses what it does not declare, and needs each of its fields."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.metrics import MetricsReport

REPORT = {
    "id": "1",
    "trialId": 1,
    "trialRunId": 0,
    "totalBatches": 3,
    "endTime": None,
    "metrics": {"avg_metrics": {"loss": 1.0}},
    "group": "training",
    "archived": False,
}


def test_a_report_round_trips() -> None:
    assert MetricsReport.model_validate(REPORT).model_dump() == REPORT


@pytest.mark.parametrize("change", [{"batches": 3}, {"trialId": None}])
def test_an_unknown_key_or_a_null_id_is_refused(change: dict) -> None:
    with pytest.raises(ValidationError):
        MetricsReport.model_validate({**REPORT, **change})
