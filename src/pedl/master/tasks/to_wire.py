"""Allocations, tasks and their log lines as Determined's v1AllocationSummary, v1Task and
v1TaskLogsResponse, and commands, notebooks, shells and TensorBoards as its v1Command and kin."""

from __future__ import annotations

from typing import Any

from pedl.common.agent_protocol import AgentUserGroup
from pedl.master.agents import to_wire as agents_to_wire
from pedl.master.db import models
from pedl.master.lifecycle import shell_tasks, task_kinds
from pedl.master.lifecycle.log_lines import readable
from pedl.master.lifecycle.states import AllocationState
from pedl.master.wire import generic_task as ntsc
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


def generic_task(
    task: models.GenericTask,
    alloc: models.Allocation | None,
    username: str,
    run_as: AgentUserGroup | None,
    *,
    private_key: bool,
) -> ntsc.AnyTask:
    """A command, notebook, shell or TensorBoard as Determined's v1Command / v1Notebook / v1Shell /
    v1Tensorboard: `alloc` is its latest (None: never queued), `run_as` who it runs as on the agent (None:
    the agent's own user); a shell's private key only where `private_key` (its owner, an admin)."""
    common: dict[str, Any] = {  # the fields of ntsc.GenericTask, which each kind's message extends
        "id": task.id,
        "description": task.description,
        "jobId": task.id,
        "resourcePool": alloc.resource_pool if alloc else "",
        "startTime": ts(task.start_time),
        "state": TASK_STATE[alloc.state] if alloc else "STATE_QUEUED",
        "username": username,
        "userId": task.owner_id,
        "displayName": username,
        "workspaceId": task.workspace_id,
        "exitStatus": (alloc.exit_reason or "") if alloc else "",
        "isReady": task_kinds.is_ready(task.kind, alloc),
    }
    address = task_kinds.service_address(task.kind, task.id) or ""
    if task.kind == "notebook":
        return ntsc.Notebook(**common, serviceAddress=address)
    if task.kind == "tensorboard":
        return ntsc.Tensorboard(
            **common,
            serviceAddress=address,
            experimentIds=list(task.experiment_ids or []),
            trialIds=list(task.trial_ids or []),
        )
    if task.kind == "shell":
        secrets = task.secrets or {}
        shell = ntsc.Shell(
            **common,
            publicKey=secrets.get("public_key", ""),
            addresses=[],
            agentUserGroup=ntsc.ShellUser(**shell_tasks.login_user(run_as)),
        )
        if private_key:
            shell.privateKey = secrets.get("private_key", "")
        return shell
    return ntsc.Command(**common)
