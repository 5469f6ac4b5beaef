"""What an instance type offers: GPUs (one slot each), vCPUs and on-demand price (USD/hour, us-east-1,
Linux). The table covers the GPU families the seeds and provisioning.md name; prices are list
prices used for cost figures, not billing."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class InstanceTypeInfo:
    name: str
    gpus: int
    vcpus: int
    price: float  # on-demand USD per hour
    gpu_model: str = ""


def _t(name: str, gpus: int, vcpus: int, price: float, model: str) -> InstanceTypeInfo:
    return InstanceTypeInfo(name, gpus, vcpus, price, model)


AWS_TYPES: dict[str, InstanceTypeInfo] = {
    t.name: t
    for t in [
        _t("p2.xlarge", 1, 4, 0.90, "K80"),
        _t("p2.8xlarge", 8, 32, 7.20, "K80"),
        _t("p2.16xlarge", 16, 64, 14.40, "K80"),
        _t("p3.2xlarge", 1, 8, 3.06, "V100"),
        _t("p3.8xlarge", 4, 32, 12.24, "V100"),
        _t("p3.16xlarge", 8, 64, 24.48, "V100"),
        _t("p3dn.24xlarge", 8, 96, 31.218, "V100"),
        _t("g4dn.xlarge", 1, 4, 0.526, "T4"),
        _t("g4dn.2xlarge", 1, 8, 0.752, "T4"),
        _t("g4dn.4xlarge", 1, 16, 1.204, "T4"),
        _t("g4dn.8xlarge", 1, 32, 2.176, "T4"),
        _t("g4dn.12xlarge", 4, 48, 3.912, "T4"),
        _t("g4dn.16xlarge", 1, 64, 4.352, "T4"),
        _t("g4dn.metal", 8, 96, 7.824, "T4"),
        _t("g5.xlarge", 1, 4, 1.006, "A10G"),
        _t("g5.2xlarge", 1, 8, 1.212, "A10G"),
        _t("g5.4xlarge", 1, 16, 1.624, "A10G"),
        _t("g5.8xlarge", 1, 32, 2.448, "A10G"),
        _t("g5.12xlarge", 4, 48, 5.672, "A10G"),
        _t("g5.16xlarge", 1, 64, 4.096, "A10G"),
        _t("g5.24xlarge", 4, 96, 8.144, "A10G"),
        _t("g5.48xlarge", 8, 192, 16.288, "A10G"),
        _t("g6.xlarge", 1, 4, 0.805, "L4"),
        _t("g6.2xlarge", 1, 8, 0.978, "L4"),
        _t("g6.4xlarge", 1, 16, 1.323, "L4"),
        _t("g6.8xlarge", 1, 32, 2.014, "L4"),
        _t("g6.12xlarge", 4, 48, 4.602, "L4"),
        _t("g6.16xlarge", 1, 64, 3.397, "L4"),
        _t("g6.24xlarge", 4, 96, 6.675, "L4"),
        _t("g6.48xlarge", 8, 192, 13.35, "L4"),
        _t("p4d.24xlarge", 8, 96, 32.773, "A100"),
        _t("p4de.24xlarge", 8, 96, 40.966, "A100"),
        _t("p5.48xlarge", 8, 192, 98.32, "H100"),
        # CPU types, usable only with cpu_slots_allowed (then slots = vCPUs unless instance_slots is set)
        _t("t3.medium", 0, 2, 0.0416, ""),
        _t("t3.large", 0, 2, 0.0832, ""),
        _t("t3.xlarge", 0, 4, 0.1664, ""),
        _t("m5.large", 0, 2, 0.096, ""),
        _t("m5.xlarge", 0, 4, 0.192, ""),
        _t("m5.2xlarge", 0, 8, 0.384, ""),
        _t("m5.4xlarge", 0, 16, 0.768, ""),
        _t("c5.xlarge", 0, 4, 0.17, ""),
        _t("c5.2xlarge", 0, 8, 0.34, ""),
        _t("c5.4xlarge", 0, 16, 0.68, ""),
    ]
}

GPU_FAMILIES = ("p2", "p3", "p3dn", "g4dn", "g5", "g6", "p4d", "p4de", "p5")


def lookup(name: str) -> InstanceTypeInfo | None:
    return AWS_TYPES.get(name)
