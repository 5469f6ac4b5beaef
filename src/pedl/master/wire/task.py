"""v1AllocationSummary (det task list, /tasks), v1Task with its allocations (GetTask) and their answers."""

from __future__ import annotations

from typing import Any

from pedl.master.wire.agent import Device
from pedl.master.wire.base import WireModel


class AgentDevices(WireModel):
    devices: list[Device]


class ResourcesStarted(WireModel):
    addresses: list[dict[str, Any]]


class ResourcesSummary(WireModel):
    """The slots one agent gives an allocation (agentDevices names the agent)."""

    resourcesId: str
    resourcesType: str
    allocationId: str
    containerId: str
    agentDevices: dict[str, AgentDevices]
    started: ResourcesStarted | None
    exited: dict[str, Any] | None


class ProxyPort(WireModel):
    """The service port a task registered, reached through /proxy/{task_id}/."""

    port: int
    proxyTcp: bool
    serviceId: str
    unauthenticated: bool


class AllocationSummary(WireModel):
    """v1AllocationSummary. A pending allocation is STATE_QUEUED, with pedl's own waitReason (why it waits)."""

    taskId: str
    allocationId: str
    name: str
    slotsNeeded: int
    registeredTime: str | None
    resources: list[ResourcesSummary]
    resourcePool: str
    priority: int
    schedulerType: str
    proxyPorts: list[ProxyPort]
    state: str
    waitReason: str | None


class GetTasksResponse(WireModel):
    allocationIdToSummary: dict[str, AllocationSummary]


class Allocation(WireModel):
    """v1Allocation: one start of a task."""

    taskId: str
    allocationId: str
    state: str  # taskv1State
    isReady: bool
    slots: int
    startTime: str | None
    endTime: str | None
    exitReason: str | None
    statusCode: int | None


class Task(WireModel):
    """v1Task: a trial's (with its trialId and experimentId) or a command's, notebook's, shell's or
    TensorBoard's."""

    taskId: str
    taskType: str
    startTime: str | None
    endTime: str | None
    trialId: int | None = None
    experimentId: int | None = None
    allocations: list[Allocation]


class GetTaskResponse(WireModel):
    task: Task


class LogLine(WireModel):
    """v1TaskLogsResponse: one line of a task's log stream. `log` repeats `message`, as Determined's does."""

    id: str
    trialId: int
    level: str
    message: str
    log: str
    timestamp: str
    agentId: str
    source: str
    stdtype: str
    taskId: str
    allocationId: str
