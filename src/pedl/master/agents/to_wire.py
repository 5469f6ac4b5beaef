"""Agents as Determined's v1Agent: each slot with its device and the allocation holding it, and the
slots counted by device type and brand."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pedl.master.wire import agent as wire
from pedl.master.wire.base import ts
from pedl.version import DETERMINED_API_VERSION

if TYPE_CHECKING:
    from pedl.master.db import models


def device(slot: dict[str, Any], index: int) -> wire.Device:
    """The device of the agent's `index`th slot, as the agent reported it."""
    cuda = slot.get("type") == "cuda"
    dev = wire.Device(
        id=index,
        type="TYPE_CUDA" if cuda else "TYPE_CPU",
        brand=slot.get("brand") or ("" if cuda else "CPU"),
        uuid=slot.get("uuid", ""),
    )
    if slot.get("memory_mib"):
        dev.memoryMib = int(slot["memory_mib"])
    return dev


def agent(a: models.Agent, held: dict[str, str], connected: bool) -> wire.Agent:
    """`held` maps slot id -> the id of the allocation holding it."""
    slots: dict[str, wire.Slot] = {}
    containers: dict[str, wire.Container] = {}
    type_stats: dict[str, wire.DeviceStats] = {}
    brand_stats: dict[str, wire.DeviceStats] = {}
    for i, sl in enumerate(a.slots or []):
        dev = device(sl, i)
        enabled, draining = a.enabled and sl.get("enabled", True), a.draining or sl.get("draining", False)
        container = None
        alloc_id = held.get(sl["id"])
        if alloc_id:
            container = wire.Container(id=alloc_id, state="STATE_RUNNING", permissionDenied=False, devices=[dev])
            containers[alloc_id] = container
        slots[sl["id"]] = wire.Slot(id=sl["id"], enabled=enabled, draining=draining, device=dev, container=container)
        for stats, key in ((type_stats, dev.type), (brand_stats, dev.brand)):
            st = stats.setdefault(key, wire.DeviceStats(disabled=0, draining=0, total=0, states={}))
            st.total += 1
            st.disabled += 0 if enabled else 1
            st.draining += 1 if draining else 0
    return wire.Agent(
        id=a.id,
        version=DETERMINED_API_VERSION,
        pedlVersion=a.version,
        registeredTime=ts(a.registered_at),
        slots=slots,
        containers=containers,
        resourcePools=[a.resource_pool],
        enabled=a.enabled,
        draining=a.draining,
        addresses=[a.address],
        label="",
        slotStats=wire.SlotStats(typeStats=type_stats, brandStats=brand_stats),
        state=a.state,
        connected=connected,
        hostname=a.hostname,
        lastHeartbeat=ts(a.last_heartbeat),
        containerRuntime=a.container_runtime or "",
    )
