"""Rows to Determined-shaped JSON (docs/det-wire.md §4): camelCase, proto enum names, RFC 3339
times, int64 as strings where the proto says so."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pedl.config.checkpoint_storage import as_determined
from pedl.master.lifecycle.log_lines import readable
from pedl.master.wire.base import ts

if TYPE_CHECKING:
    from pedl.master.db import models


def checkpoint_files(c: models.Checkpoint) -> dict[str, str]:
    """The checkpoint's files and sizes (int64 as strings). A DELETED one keeps listing the files it
    last had, as Determined's does (det's e2e test_checkpoint_partial_delete expects them); its state
    says they are gone (det and the WebUI download only COMPLETED and PARTIALLY_DELETED ones, and the
    master serves what storage holds) and it counts in no checkpoint size."""
    return {k: str(v) for k, v in (c.resources or {}).items()}


def checkpoint(c: models.Checkpoint, exp: models.Experiment | None, t: models.Trial | None,
               validation: dict[str, Any] | None) -> dict[str, Any]:
    training: dict[str, Any] = {}
    if t is not None and exp is not None:
        metric_name = exp.config.get("searcher", {}).get("metric")
        training = {"trialId": t.id, "experimentId": exp.id, "experimentConfig": as_determined(exp.config),
                    "hparams": t.hparams,
                    "trainingMetrics": {"avgMetrics": {}},
                    "validationMetrics": {"avgMetrics": validation or {}}}
        if validation and metric_name in validation:
            training["searcherMetric"] = validation[metric_name]
    meta = dict(c.meta or {})
    meta.setdefault("steps_completed", c.steps_completed)
    # pedl's own `deleting`: its files are being deleted, so it is not served (its state is PARTIALLY_DELETED)
    return {"uuid": c.uuid, "state": c.state, "deleting": c.deleting_by is not None, "metadata": meta,
            "resources": checkpoint_files(c), "training": training,
            "reportTime": ts(c.report_time), "taskId": c.task_id or "", "allocationId": c.allocation_id or "",
            "storage": c.storage, "storageId": storage_id(c.storage)}


def storage_id(storage: dict[str, Any] | None) -> int:
    """Determined numbers each distinct checkpoint storage config (a row of its own); pedl keeps the
    config on the checkpoint, so the same config always gets the same positive 31-bit number."""
    text = json.dumps(storage or {}, sort_keys=True, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big") >> 1 or 1


def metrics_report(m: models.Metric) -> dict:
    """Determined's v1MetricsReport; its SDK reads a validation report's values from
    validation_metrics, any other group's from avg_metrics."""
    key = "validation_metrics" if m.group == "validation" else "avg_metrics"
    return {"id": str(m.id), "trialId": m.trial_id, "trialRunId": m.trial_run_id, "totalBatches": m.steps_completed,
            "endTime": ts(m.report_time), "metrics": {key: m.metrics}, "group": m.group, "archived": False}


def log_line(row: models.TaskLog) -> dict[str, Any]:
    message = readable(row.message)  # NULs come back as the task printed them (lifecycle/log_lines.py)
    return {"id": str(row.id), "trialId": row.trial_id or 0, "level": row.level, "message": message,
            "log": message, "timestamp": ts(row.timestamp), "agentId": row.agent_id or "",
            "source": row.source, "stdtype": row.stdtype, "taskId": row.task_id,
            "allocationId": row.allocation_id or ""}


def event(ev: models.Event) -> dict[str, Any]:
    return {"id": ev.id, "entityType": ev.entity_type, "entityId": ev.entity_id, "time": ts(ev.time),
            "fromState": ev.from_state, "toState": ev.to_state, "level": ev.level, "message": ev.message}
