"""EC2's records as the AWS provider writes and reads them: the tags that make an instance or spot
request this pool's, the launch specification, and a described instance as a CloudInstance."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from pedl.config.provider_config import AWSProviderConfig
from pedl.master.provisioner.providers.base import CloudInstance, CloudState, LaunchRequest

POOL_TAG = "pedl-resource-pool"
CLUSTER_TAG = "pedl-cluster-id"  # information only: the tag pair and the pool decide ownership
TOKEN_TAG = "pedl-launch-token"  # finds a launch again after a crash (idempotency by request token)
# DescribeImages is not in the seeds' IAM policy, so the AMI's own root device name cannot be
# looked up; /dev/sda1 is the root of Ubuntu and Deep Learning AMIs (Amazon Linux uses /dev/xvda).
ROOT_DEVICE_NAME = "/dev/sda1"
LIVE_STATES = ("pending", "running", "shutting-down", "stopping", "stopped")
STATES = {
    "pending": CloudState.PENDING,
    "running": CloudState.RUNNING,
    "shutting-down": CloudState.TERMINATING,
    "stopping": CloudState.TERMINATING,
    "stopped": CloudState.TERMINATING,
}
FILTER_CHUNK = 100  # ids per filter value list / TerminateInstances call


def epoch(value: Any, default: float) -> float:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return default


def instance_state(instance: dict) -> str:
    return (instance.get("State") or {}).get("Name", "")


def tag_dict(resource: dict) -> dict[str, str]:
    return {t["Key"]: t.get("Value", "") for t in resource.get("Tags") or []}


def chunks(items: list[str], size: int = FILTER_CHUNK) -> Iterable[list[str]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def client_token(request: LaunchRequest, n: int) -> str:
    """EC2's idempotency token of the n-th instance's call: the launch's own when it launches one."""
    return request.token if request.count == 1 else f"{request.token}-{n}"


def ownership_filters(cfg: AWSProviderConfig, pool: str) -> list[dict]:
    return [{"Name": f"tag:{cfg.tag_key}", "Values": [cfg.tag_value]}, {"Name": f"tag:{POOL_TAG}", "Values": [pool]}]


def tags(cfg: AWSProviderConfig, pool: str, cluster_id: str, token: str | None) -> list[dict[str, str]]:
    found = {"Name": cfg.instance_name, POOL_TAG: pool, CLUSTER_TAG: cluster_id}
    if token:
        found[TOKEN_TAG] = token
    found[cfg.tag_key] = cfg.tag_value  # last: the pair wins over anything it collides with
    return [{"Key": k, "Value": v} for k, v in found.items()]


def is_ours(cfg: AWSProviderConfig, pool: str, resource: dict) -> bool:
    found = tag_dict(resource)
    return found.get(cfg.tag_key) == cfg.tag_value and found.get(POOL_TAG) == pool


def to_cloud(inst: dict, now: float, spot_request_id: str | None = None) -> CloudInstance:
    """A described instance; `now` is its launch time when EC2 gives none."""
    spot_request_id = spot_request_id or inst.get("SpotInstanceRequestId") or None
    return CloudInstance(
        id=inst["InstanceId"],
        instance_type=inst.get("InstanceType", ""),
        state=STATES.get(instance_state(inst), CloudState.PENDING),
        launched_at=epoch(inst.get("LaunchTime"), now),
        spot=inst.get("InstanceLifecycle") == "spot" or spot_request_id is not None,
        spot_request_id=spot_request_id,
        address=inst.get("PrivateIpAddress") or inst.get("PublicIpAddress") or "",
    )


def requested_instance(req: dict, asked_at: float | None, now: float) -> CloudInstance:
    """An open spot request, shown as a pseudo-instance whose id is the request's; launched when this
    master asked for it (`asked_at`), else when EC2 says it was created."""
    rid = req["SpotInstanceRequestId"]
    return CloudInstance(
        id=rid,
        instance_type=(req.get("LaunchSpecification") or {}).get("InstanceType", ""),
        state=CloudState.REQUESTED,
        launched_at=asked_at or epoch(req.get("CreateTime"), now),
        spot=True,
        spot_request_id=rid,
    )


def launch_spec(cfg: AWSProviderConfig, request: LaunchRequest) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "ImageId": cfg.image_id,
        "InstanceType": request.instance_type,
        "KeyName": cfg.ssh_key_name,
        "BlockDeviceMappings": [
            {
                "DeviceName": ROOT_DEVICE_NAME,
                "Ebs": {"VolumeSize": cfg.root_volume_size, "VolumeType": "gp3", "DeleteOnTermination": True},
            }
        ],
    }
    ni = cfg.network_interface
    if ni.subnet_id or ni.security_group_id:
        iface: dict[str, Any] = {
            "DeviceIndex": 0,
            "AssociatePublicIpAddress": ni.public_ip,
            "DeleteOnTermination": True,
        }
        if ni.subnet_id:
            iface["SubnetId"] = ni.subnet_id
        if ni.security_group_id:
            iface["Groups"] = [ni.security_group_id]
        spec["NetworkInterfaces"] = [iface]
    if cfg.iam_instance_profile_arn:
        spec["IamInstanceProfile"] = {"Arn": cfg.iam_instance_profile_arn}
    return spec


def spot_price(cfg: AWSProviderConfig, instance_type: str) -> str | None:
    if cfg.spot_max_price:
        return cfg.spot_max_price
    price = cfg.price_of(instance_type)
    return f"{price:.4f}" if price > 0 else None  # None: EC2's default cap, the on-demand price
