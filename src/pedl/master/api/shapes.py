"""Rows to Determined-shaped JSON (docs/det-wire.md §4): camelCase, proto enum names, RFC 3339
times, int64 as strings where the proto says so."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pedl.master.checkpoints import NONE as NO_CHECKPOINTS
from pedl.master.checkpoints import CheckpointTotals
from pedl.master.checkpoints.to_wire import checkpoint_files
from pedl.master.experiments import ExperimentStats
from pedl.master.experiments import split as split_labels
from pedl.master.lifecycle import agent_user_groups
from pedl.master.lifecycle.log_lines import readable
from pedl.master.lifecycle.states import AllocationState, CheckpointState
from pedl.master.wire.base import ts
from pedl.master.workspaces import Placement
from pedl.version import DETERMINED_API_VERSION

if TYPE_CHECKING:
    from pedl.master.db import models


def user(u: models.User) -> dict[str, Any]:
    return {"id": u.id, "username": u.username, "admin": u.admin, "active": u.active,
            "displayName": u.display_name or "", "remote": False, "modifiedAt": ts(u.modified_at),
            "agentUserGroup": agent_user_groups.shape(agent_user_groups.of_user(u))}


def experiment(e: models.Experiment, username: str, stats: ExperimentStats,
               place: Placement | None = None) -> dict[str, Any]:
    place = place or Placement()
    return {
        "id": e.id, "name": e.name, "description": e.description, "labels": split_labels(e.labels),
        "archived": e.archived, "config": e.config, "originalConfig": e.original_config,
        "jobId": f"job-{e.id}", "numTrials": stats.num_trials, "projectId": e.project_id,
        "projectOwnerId": place.project_owner_id,
        "activeTrials": stats.active_trials, "bestTrialSearcherMetric": stats.best_metric,
        "bestTrialId": stats.best_trial_id,
        "searcherType": e.config.get("searcher", {}).get("name", "single"),
        "searcherMetric": e.config.get("searcher", {}).get("metric", ""),
        "startTime": ts(e.start_time), "endTime": ts(e.end_time), "state": stats.state or e.state, "username": username,
        "userId": e.owner_id, "progress": e.progress, "resourcePool": e.resource_pool, "forkedFrom": e.parent_id,
        "notes": e.notes, "projectName": place.project_name, "workspaceName": place.workspace_name,
        "workspaceId": place.workspace_id,
        "parentArchived": False, "unmanaged": False, "endReason": e.end_reason,
        "checkpointCount": stats.checkpoints.count, "checkpointSize": str(stats.checkpoints.size),
    }


def metrics_workload(m: models.Metric) -> dict[str, Any]:
    return {"metrics": {"avgMetrics": m.metrics, "batchMetrics": []}, "numInputs": 0,
            "totalBatches": m.steps_completed, "endTime": ts(m.report_time)}


def trial(t: models.Trial, best_validation: models.Metric | None = None,
          latest_validation: models.Metric | None = None, checkpoints: CheckpointTotals = NO_CHECKPOINTS,
          best_checkpoint: models.Checkpoint | None = None, wait_reason: str | None = None) -> dict[str, Any]:
    out = {
        "id": t.id, "experimentId": t.experiment_id, "hparams": t.hparams, "restarts": t.restarts,
        "startTime": ts(t.start_time), "endTime": ts(t.end_time), "state": t.state,
        "totalBatchesProcessed": t.total_batches, "summaryMetrics": t.summary_metrics or {},
        "taskId": t.task_id, "taskIds": [t.task_id], "searcherMetricValue": t.best_metric,
        "checkpointCount": checkpoints.count, "totalCheckpointSize": str(checkpoints.size),
        "warmStartCheckpointUuid": t.warm_start_checkpoint or "",
        "latestCheckpointUuid": t.latest_checkpoint or "",
        "endReason": t.end_reason, "runnerState": "",
    }
    if best_validation is not None:
        out["bestValidation"] = metrics_workload(best_validation)
    if latest_validation is not None:
        out["latestValidation"] = metrics_workload(latest_validation)
    if best_checkpoint is not None:
        out["bestCheckpoint"] = checkpoint_workload(best_checkpoint)
    if wait_reason:
        out["waitReason"] = wait_reason  # pedl's own: why its queued allocation waits
    return out


def checkpoint_workload(c: models.Checkpoint) -> dict[str, Any]:
    # det 0.38.1's `trial describe` asserts on a PARTIALLY_DELETED workload: it shows the files left as COMPLETED,
    # and one whose files are being deleted (lifecycle/checkpoint_gc_holds.py) as DELETED, since none are offered
    state = CheckpointState.COMPLETED if c.state == CheckpointState.PARTIALLY_DELETED else c.state
    if c.deleting_by is not None:
        state = CheckpointState.DELETED
    return {"uuid": c.uuid, "state": state, "totalBatches": c.steps_completed, "endTime": ts(c.report_time),
            "metadata": c.meta, "resources": checkpoint_files(c)}


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


def _device(slot: dict[str, Any], index: int) -> dict[str, Any]:
    """Determined's v1Device, plus pedl's own memoryMib (the device's total memory) where the agent
    reported one."""
    dev = {"id": index, "type": "TYPE_CUDA" if slot.get("type") == "cuda" else "TYPE_CPU",
           "brand": slot.get("brand") or ("CPU" if slot.get("type") != "cuda" else ""), "uuid": slot.get("uuid", "")}
    if slot.get("memory_mib"):
        dev["memoryMib"] = int(slot["memory_mib"])
    return dev


def agent(a: models.Agent, held: dict[str, str], connected: bool) -> dict[str, Any]:
    """`held` maps slot id -> allocation id on this agent."""
    slots, containers = {}, {}
    type_stats: dict[str, dict[str, Any]] = {}
    brand_stats: dict[str, dict[str, Any]] = {}
    for i, sl in enumerate(a.slots or []):
        dev = _device(sl, i)
        enabled, draining = a.enabled and sl.get("enabled", True), a.draining or sl.get("draining", False)
        slot_json: dict[str, Any] = {"id": sl["id"], "enabled": enabled, "draining": draining, "device": dev,
                                     "container": None}  # Determined sends a free slot's container as null
        alloc_id = held.get(sl["id"])
        if alloc_id:
            container = {"id": alloc_id, "state": "STATE_RUNNING", "permissionDenied": False, "devices": [dev]}
            slot_json["container"] = container
            containers[alloc_id] = container
        slots[sl["id"]] = slot_json
        for stats, key in ((type_stats, dev["type"]), (brand_stats, dev["brand"])):
            st = stats.setdefault(key, {"disabled": 0, "draining": 0, "total": 0, "states": {}})
            st["total"] += 1
            st["disabled"] += 0 if enabled else 1
            st["draining"] += 1 if draining else 0
    # `version` is the Determined API version the master speaks (det's tests compare it with their
    # own); the agent's pedl version is `pedlVersion`, as on /api/v1/master
    return {"id": a.id, "version": DETERMINED_API_VERSION, "pedlVersion": a.version,
            "registeredTime": ts(a.registered_at), "slots": slots,
            "containers": containers, "resourcePools": [a.resource_pool], "enabled": a.enabled,
            "draining": a.draining, "addresses": [a.address], "label": "",
            "slotStats": {"typeStats": type_stats, "brandStats": brand_stats},
            "state": a.state, "connected": connected, "hostname": a.hostname,
            "lastHeartbeat": ts(a.last_heartbeat),
            "containerRuntime": a.container_runtime or ""}  # pedl's: "docker" when it runs image tasks


def _proxy_ports(al: models.Allocation) -> list[dict[str, Any]]:
    """The service port the task registered (reached through /proxy/{task_id}/), as det task list shows it."""
    if al.proxy_port is None:
        return []
    return [{"port": al.proxy_port, "proxyTcp": False, "serviceId": al.task_id, "unauthenticated": False}]


def allocation_summary(al: models.Allocation, agents_by_id: dict[str, models.Agent]) -> dict[str, Any]:
    resources = []
    for place in al.assignment or []:
        ag = agents_by_id.get(place["agent_id"])
        slot_map = {sl["id"]: (i, sl) for i, sl in enumerate(ag.slots)} if ag else {}
        devices = [_device(slot_map[sid][1], slot_map[sid][0]) for sid in place["slot_ids"] if sid in slot_map]
        resources.append({"resourcesId": al.id, "resourcesType": "process", "allocationId": al.id,
                          "containerId": al.id, "agentDevices": {place["agent_id"]: {"devices": devices}},
                          "started": None if al.started_at is None else {"addresses": []},
                          "exited": None})
    return {"taskId": al.task_id, "allocationId": al.id, "name": al.name, "slotsNeeded": al.slots_needed,
            "registeredTime": ts(al.queued_at), "resources": resources, "resourcePool": al.resource_pool,
            "priority": al.priority, "schedulerType": "priority", "proxyPorts": _proxy_ports(al),
            "state": "STATE_QUEUED" if al.state == AllocationState.PENDING else al.state,
            "waitReason": al.wait_reason if al.state == AllocationState.PENDING else None}


def event(ev: models.Event) -> dict[str, Any]:
    return {"id": ev.id, "entityType": ev.entity_type, "entityId": ev.entity_id, "time": ts(ev.time),
            "fromState": ev.from_state, "toState": ev.to_state, "level": ev.level, "message": ev.message}
