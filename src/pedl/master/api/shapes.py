"""Rows to Determined-shaped JSON for the messages `wire/` does not model yet (metric reports, log lines,
events): camelCase, proto enum names, RFC 3339 times, int64 as strings where the proto says so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pedl.master.lifecycle.log_lines import readable
from pedl.master.wire.base import ts

if TYPE_CHECKING:
    from pedl.master.db import models


def metrics_report(m: models.Metric) -> dict:
    """Determined's v1MetricsReport; its SDK reads a validation report's values from
    validation_metrics, any other group's from avg_metrics."""
    key = "validation_metrics" if m.group == "validation" else "avg_metrics"
    return {
        "id": str(m.id),
        "trialId": m.trial_id,
        "trialRunId": m.trial_run_id,
        "totalBatches": m.steps_completed,
        "endTime": ts(m.report_time),
        "metrics": {key: m.metrics},
        "group": m.group,
        "archived": False,
    }


def log_line(row: models.TaskLog) -> dict[str, Any]:
    message = readable(row.message)  # NULs come back as the task printed them (lifecycle/log_lines.py)
    return {
        "id": str(row.id),
        "trialId": row.trial_id or 0,
        "level": row.level,
        "message": message,
        "log": message,
        "timestamp": ts(row.timestamp),
        "agentId": row.agent_id or "",
        "source": row.source,
        "stdtype": row.stdtype,
        "taskId": row.task_id,
        "allocationId": row.allocation_id or "",
    }


def event(ev: models.Event) -> dict[str, Any]:
    return {
        "id": ev.id,
        "entityType": ev.entity_type,
        "entityId": ev.entity_id,
        "time": ts(ev.time),
        "fromState": ev.from_state,
        "toState": ev.to_state,
        "level": ev.level,
        "message": ev.message,
    }
