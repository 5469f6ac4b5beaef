"""Slot detection: real NVML when the machine has it, CPU slots otherwise."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from pedl.agent.devices import detect_slots, gpu_slots


def _fake_nvml(names: list[str], memory: list[int | None] | None = None) -> SimpleNamespace:
    """An NVML stand-in (the dependency, not the code under test) with `names` devices of `memory`
    bytes each (default 80 GiB; None: NVML cannot tell, as for some vGPU and MIG setups)."""
    sizes = memory if memory is not None else [80 * 1024**3] * len(names)

    def memory_info(h: int) -> SimpleNamespace:
        if sizes[h] is None:
            raise RuntimeError("Not Supported")  # what pynvml's NVMLError_NotSupported says
        return SimpleNamespace(total=sizes[h], free=0, used=sizes[h])

    return SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlDeviceGetCount=lambda: len(names),
        nvmlDeviceGetHandleByIndex=lambda i: i,
        nvmlDeviceGetName=lambda h: names[h].encode(),  # old releases answer bytes
        nvmlDeviceGetUUID=lambda h: f"GPU-{h}",
        nvmlDeviceGetMemoryInfo=memory_info,
    )


def _broken_nvml() -> SimpleNamespace:
    def fail() -> None:
        raise RuntimeError("NVML Shared Library Not Found")

    return SimpleNamespace(nvmlInit=fail, nvmlShutdown=fail)


@pytest.mark.skipif(bool(gpu_slots()), reason="this machine has GPUs")
def test_without_nvml_one_cpu_slot_by_default() -> None:
    slots = detect_slots(None)
    assert [(s.id, s.type) for s in slots] == [("0", "cpu")]


@pytest.mark.skipif(bool(gpu_slots()), reason="this machine has GPUs")
def test_cpu_slot_count_from_option() -> None:
    assert [s.id for s in detect_slots(3)] == ["0", "1", "2"]
    assert all(s.type == "cpu" for s in detect_slots(3))
    assert detect_slots(0) == []


def test_nvml_failure_means_no_gpus() -> None:
    assert gpu_slots(_broken_nvml()) == []
    assert [s.type for s in detect_slots(2, nvml=_broken_nvml())] == ["cpu", "cpu"]


def test_gpus_win_over_slots_option(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="pedl.agent.devices")
    slots = detect_slots(4, nvml=_fake_nvml(["NVIDIA H100", "NVIDIA H100"]))
    assert [(s.id, s.type, s.brand, s.uuid) for s in slots] == [
        ("0", "cuda", "NVIDIA H100", "GPU-0"),
        ("1", "cuda", "NVIDIA H100", "GPU-1"),
    ]
    assert slots[0].memory_mib == 80 * 1024
    assert "ignored" in caplog.text


def test_each_gpu_carries_its_total_memory_in_mib_when_nvml_knows_it() -> None:
    nvml = _fake_nvml(
        ["NVIDIA H100 80GB HBM3", "NVIDIA A10", "GRID T4-8Q"], memory=[81559 * 1024**2, 24 * 1024**3 - 1, None]
    )
    slots = detect_slots(None, nvml=nvml)
    assert [(s.brand, s.memory_mib) for s in slots] == [
        ("NVIDIA H100 80GB HBM3", 81559),
        ("NVIDIA A10", 24 * 1024 - 1),
        ("GRID T4-8Q", 0),
    ]  # 0: unknown
    assert all(s.type == "cuda" for s in slots)


@pytest.mark.skipif(not gpu_slots(), reason="no NVIDIA GPU on this machine")
def test_real_gpus_are_cuda_slots() -> None:
    slots = detect_slots(2)
    assert slots and all(s.type == "cuda" and s.uuid.startswith("GPU-") and s.brand for s in slots)
    assert all(s.memory_mib > 1024 for s in slots)  # every datacenter GPU has more than 1 GiB
    assert [s.id for s in slots] == [str(i) for i in range(len(slots))]
