"""Slot detection: the machine's NVIDIA GPUs through NVML, else a number of CPU slots.

NVML is imported lazily and any failure means "no GPUs", so CPU-only machines need no driver.
"""

from __future__ import annotations

import contextlib
import logging
from types import ModuleType

from pedl.common.agent_protocol import SlotInfo

log = logging.getLogger(__name__)


def detect_slots(slots: int | None = None, *, nvml: ModuleType | None = None) -> list[SlotInfo]:
    """GPUs when NVML finds some; otherwise `slots` CPU slots (None: 1, 0: none).

    `nvml` replaces the `pynvml` module, so the GPU path can be exercised without a GPU.
    """
    gpus = gpu_slots(nvml)
    if gpus:
        if slots is not None:
            log.info("found %d GPU(s); --slots %d is ignored", len(gpus), slots)
        return gpus
    count = 1 if slots is None else slots
    return [SlotInfo(id=str(i), type="cpu", brand="cpu") for i in range(count)]


def gpu_slots(nvml: ModuleType | None = None) -> list[SlotInfo]:
    """One cuda slot per NVML device; [] when NVML is missing or fails in any way."""
    try:
        if nvml is None:
            import pynvml as nvml
        nvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no device: all mean "no GPUs"
        log.debug("NVML unavailable (%s); using CPU slots", exc)
        return []
    try:
        found = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            found.append(
                SlotInfo(
                    id=str(index),
                    type="cuda",
                    brand=_text(nvml.nvmlDeviceGetName(handle)),
                    uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
                    memory_mib=_memory_mib(nvml, handle),
                )
            )
        return found
    except Exception as exc:
        log.warning("NVML failed while listing GPUs (%s); using CPU slots", exc)
        return []
    finally:
        # shutting down a half-initialised NVML can fail; there is nothing left to do then
        with contextlib.suppress(Exception):
            nvml.nvmlShutdown()


def _memory_mib(nvml: ModuleType, handle: object) -> int:
    """The device's total memory in MiB; 0 (unknown) when NVML cannot tell, which costs the slot
    nothing else."""
    try:
        return int(nvml.nvmlDeviceGetMemoryInfo(handle).total) // (1024 * 1024)
    except Exception as exc:
        log.debug("NVML has no memory size for a GPU (%s)", exc)
        return 0


def _text(value: str | bytes) -> str:
    # older nvidia-ml-py releases return bytes
    return value.decode() if isinstance(value, bytes) else value
