"""Allocations and tasks as Determined's v1AllocationSummary and v1Task."""

from __future__ import annotations

from pedl.master.agents import to_wire as agents_to_wire
from pedl.master.db import models
from pedl.master.lifecycle import task_kinds
from pedl.master.lifecycle.log_lines import readable
from pedl.master.lifecycle.states import AllocationState
from pedl.master.wire import task as wire
from pedl.master.wire.base import ts

# Determined's taskv1State of each allocation state
TASK_STATE = {
    AllocationState.PENDING: "STATE_QUEUED",
    AllocationState.ASSIGNED: "STATE_STARTING",
    AllocationState.RUNNING: "STATE_RUNNING",
    AllocationState.TERMINATING: "STATE_TERMINATING",
    AllocationState.TERMINATED: "STATE_TERMINATED",
}


def _proxy_ports(al: models.Allocation) -> list[wire.ProxyPort]:
    """The service port the task registered, as det task list shows it."""
    if al.proxy_port is None:
        return []
    return [wire.ProxyPort(port=al.proxy_port, proxyTcp=False, serviceId=al.task_id, unauthenticated=False)]


def allocation_summary(al: models.Allocation, agents_by_id: dict[str, models.Agent]) -> wire.AllocationSummary:
    resources = []
    for place in al.assignment or []:
        ag = agents_by_id.get(place["agent_id"])
        slot_map = {sl["id"]: (i, sl) for i, sl in enumerate(ag.slots)} if ag else {}
        devices = [
            agents_to_wire.device(slot_map[sid][1], slot_map[sid][0]) for sid in place["slot_ids"] if sid in slot_map
        ]
        resources.append(
            wire.ResourcesSummary(
                resourcesId=al.id,
                resourcesType="process",
                allocationId=al.id,
                containerId=al.id,
                agentDevices={place["agent_id"]: wire.AgentDevices(devices=devices)},
                started=None if al.started_at is None else wire.ResourcesStarted(addresses=[]),
                exited=None,
            )
        )
    pending = al.state == AllocationState.PENDING
    return wire.AllocationSummary(
        taskId=al.task_id,
        allocationId=al.id,
        name=al.name,
        slotsNeeded=al.slots_needed,
        registeredTime=ts(al.queued_at),
        resources=resources,
        resourcePool=al.resource_pool,
        priority=al.priority,
        schedulerType="priority",
        proxyPorts=_proxy_ports(al),
        state="STATE_QUEUED" if pending else al.state,
        waitReason=al.wait_reason if pending else None,
    )


def task(found: models.Trial | models.GenericTask, allocs: list[models.Allocation]) -> wire.Task:
    """A trial's task (or a command's, notebook's, shell's or TensorBoard's) and its allocations."""
    kind = found.kind if isinstance(found, models.GenericTask) else None
    running = AllocationState.RUNNING
    shown = [
        wire.Allocation(
            taskId=a.task_id,
            allocationId=a.id,
            state=TASK_STATE[a.state],
            isReady=a.state == running if kind is None else task_kinds.is_ready(kind, a),
            slots=a.slots_needed,
            startTime=ts(a.started_at),
            endTime=ts(a.ended_at),
            exitReason=a.exit_reason,
            statusCode=a.exit_code,
        )
        for a in allocs
    ]
    if isinstance(found, models.GenericTask):
        ended = allocs[-1].ended_at if allocs and allocs[-1].state == AllocationState.TERMINATED else None
        return wire.Task(
            taskId=found.id,
            taskType=f"TASK_TYPE_{found.kind.upper()}",
            startTime=ts(found.start_time),
            endTime=ts(ended),
            allocations=shown,
        )
    return wire.Task(
        taskId=found.task_id,
        taskType="TASK_TYPE_TRIAL",
        startTime=ts(found.start_time),
        endTime=ts(found.end_time),
        trialId=found.id,
        experimentId=found.experiment_id,
        allocations=shown,
    )


def log_line(row: models.TaskLog) -> wire.LogLine:
    message = readable(row.message)  # NULs come back as the task printed them (lifecycle/log_lines.py)
    return wire.LogLine(
        id=str(row.id),
        trialId=row.trial_id or 0,
        level=row.level,
        message=message,
        log=message,
        timestamp=ts(row.timestamp),
        agentId=row.agent_id or "",
        source=row.source,
        stdtype=row.stdtype,
        taskId=row.task_id,
        allocationId=row.allocation_id or "",
    )
