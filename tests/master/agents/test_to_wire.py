"""An agent row as v1Agent: each slot's device and holder, and the slots counted by type and brand."""

from __future__ import annotations

from pedl.master.agents import to_wire
from pedl.master.db import models
from pedl.version import DETERMINED_API_VERSION


def an_agent(**extra) -> models.Agent:
    slots = [
        {"id": "a1-0", "type": "cuda", "brand": "NVIDIA H100", "uuid": "GPU-0", "memory_mib": 81559},
        {"id": "a1-1", "type": "cuda", "brand": "NVIDIA H100", "uuid": "GPU-1", "enabled": False},
    ]
    fields = dict(
        id="a1",
        hostname="host-1",
        address="10.0.0.5",
        resource_pool="gpu",
        slots=slots,
        state="CONNECTED",
        version="1.2.3",
        registered_at=0.0,
        last_heartbeat=2.0,
        enabled=True,
        draining=False,
        container_runtime="",
    )
    return models.Agent(**{**fields, **extra})


def test_an_agent_with_one_slot_held_and_one_disabled() -> None:
    shown = to_wire.agent(an_agent(), {"a1-0": "7.1.1"}, connected=True).model_dump(exclude_unset=True)
    gpu0 = {"id": 0, "type": "TYPE_CUDA", "brand": "NVIDIA H100", "uuid": "GPU-0", "memoryMib": 81559}
    gpu1 = {"id": 1, "type": "TYPE_CUDA", "brand": "NVIDIA H100", "uuid": "GPU-1"}  # no memory reported: no key
    held = {"id": "7.1.1", "state": "STATE_RUNNING", "permissionDenied": False, "devices": [gpu0]}
    stats = {"disabled": 1, "draining": 0, "total": 2, "states": {}}
    assert shown == {
        "id": "a1",
        "version": DETERMINED_API_VERSION,
        "pedlVersion": "1.2.3",
        "registeredTime": "1970-01-01T00:00:00Z",
        "slots": {
            "a1-0": {"id": "a1-0", "enabled": True, "draining": False, "device": gpu0, "container": held},
            "a1-1": {"id": "a1-1", "enabled": False, "draining": False, "device": gpu1, "container": None},
        },
        "containers": {"7.1.1": held},
        "resourcePools": ["gpu"],
        "enabled": True,
        "draining": False,
        "addresses": ["10.0.0.5"],
        "label": "",
        "slotStats": {"typeStats": {"TYPE_CUDA": stats}, "brandStats": {"NVIDIA H100": stats}},
        "state": "CONNECTED",
        "connected": True,
        "hostname": "host-1",
        "lastHeartbeat": "1970-01-01T00:00:02Z",
        "containerRuntime": "",
    }


def test_a_draining_agent_drains_every_slot_and_a_cpu_slot_is_branded_cpu() -> None:
    cpu = [{"id": "c-0", "type": "cpu"}]
    shown = to_wire.agent(an_agent(slots=cpu, draining=True, enabled=False), {}, connected=False)
    slot = shown.slots["c-0"]
    assert (slot.enabled, slot.draining, slot.device.type, slot.device.brand) == (False, True, "TYPE_CPU", "CPU")
    assert shown.slotStats.typeStats["TYPE_CPU"].draining == 1 and shown.containers == {}
