"""v1Agent, its slots and devices, and the answers of the agent and slot routes."""

from __future__ import annotations

from pedl.master.wire.base import WireModel


class Device(WireModel):
    """v1Device, plus pedl's own memoryMib (the device's total memory) where the agent reported one."""

    id: int
    type: str  # TYPE_CUDA or TYPE_CPU
    brand: str
    uuid: str
    memoryMib: int | None = None


class Container(WireModel):
    """v1Container: the allocation holding a slot (its id is the allocation's)."""

    id: str
    state: str
    permissionDenied: bool
    devices: list[Device]


class Slot(WireModel):
    """v1Slot. A free slot's `container` is null: det's e2e suite reads the key."""

    id: str
    enabled: bool
    draining: bool
    device: Device
    container: Container | None


class DeviceStats(WireModel):
    disabled: int
    draining: int
    total: int
    states: dict[str, int]


class SlotStats(WireModel):
    typeStats: dict[str, DeviceStats]
    brandStats: dict[str, DeviceStats]


class Agent(WireModel):
    """v1Agent. `version` is the Determined API version the master speaks (det's tests compare it with their
    own); the agent's pedl version is pedl's own `pedlVersion`, as on /api/v1/master. `connected`,
    `hostname`, `lastHeartbeat` and `containerRuntime` ("docker" when it runs image tasks) are pedl's own."""

    id: str
    version: str
    pedlVersion: str
    registeredTime: str | None
    slots: dict[str, Slot]
    containers: dict[str, Container]
    resourcePools: list[str]
    enabled: bool
    draining: bool
    addresses: list[str]
    label: str
    slotStats: SlotStats
    state: str
    connected: bool
    hostname: str
    lastHeartbeat: str | None
    containerRuntime: str


class GetAgentsResponse(WireModel):
    agents: list[Agent]


class GetAgentResponse(WireModel):
    """GetAgent, and an agent enabled or disabled."""

    agent: Agent


class GetSlotsResponse(WireModel):
    slots: list[Slot]


class GetSlotResponse(WireModel):
    """GetSlot, and a slot enabled or disabled."""

    slot: Slot
