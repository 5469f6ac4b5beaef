"""Rows to Determined-shaped JSON (docs/det-wire.md §4): camelCase, proto enum names, RFC 3339
times, int64 as strings where the proto says so."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

from pedl.config.checkpoint_storage import as_determined
from pedl.master.lifecycle import agent_user_groups
from pedl.master.lifecycle.log_lines import readable
from pedl.master.lifecycle.states import AllocationState
from pedl.master.wire.base import ts
from pedl.version import DETERMINED_API_VERSION

if TYPE_CHECKING:
    from pedl.master.db import models


def user(u: models.User) -> dict[str, Any]:
    return {"id": u.id, "username": u.username, "admin": u.admin, "active": u.active,
            "displayName": u.display_name or "", "remote": False, "modifiedAt": ts(u.modified_at),
            "agentUserGroup": agent_user_groups.shape(agent_user_groups.of_user(u))}


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
