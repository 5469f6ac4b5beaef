"""A cluster's agent instances and spot requests: those carrying its tag pair (the master tags what it
launches with it), and only those; never the stack's own master instance, which the stack deletes."""

from __future__ import annotations

from typing import Any

from pedl.deploy.aws_session import AwsSession, aws_errors
from pedl.deploy.options import tag_pair
from pedl.deploy.waiting import Progress, wait_until
from pedl.master.provisioner.providers.aws_records import POOL_TAG

LIVE_STATES = ["pending", "running", "stopping", "stopped", "shutting-down"]
OPEN_SPOT_STATES = ["open", "active", "disabled"]
TERMINATE_WAIT_S = 15 * 60


def _tag_filter(cluster_id: str) -> dict[str, Any]:
    key, value = tag_pair(cluster_id)
    return {"Name": f"tag:{key}", "Values": [value]}


def _tags(resource: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in resource.get("Tags") or []}


def spot_requests(aws: AwsSession, cluster_id: str) -> list[dict[str, Any]]:
    """The cluster's spot requests that can still launch (or hold) an instance."""
    with aws_errors("DescribeSpotInstanceRequests"):
        pages = (
            aws.client("ec2")
            .get_paginator("describe_spot_instance_requests")
            .paginate(Filters=[_tag_filter(cluster_id), {"Name": "state", "Values": OPEN_SPOT_STATES}])
        )
        return [r for page in pages for r in page.get("SpotInstanceRequests", [])]


def agent_instances(
    aws: AwsSession, cluster_id: str, *, exclude: set[str], also: set[str] | None = None
) -> list[dict[str, Any]]:
    """The cluster's instances not yet terminated, but those in `exclude` (the master); with `also`
    (instances of the cluster's spot requests, which may lack the tags yet) when they live."""
    ec2 = aws.client("ec2")
    found: dict[str, dict[str, Any]] = {}
    with aws_errors("DescribeInstances"):
        for page in ec2.get_paginator("describe_instances").paginate(
            Filters=[_tag_filter(cluster_id), {"Name": "instance-state-name", "Values": LIVE_STATES}]
        ):
            for reservation in page.get("Reservations", []):
                found.update({i["InstanceId"]: i for i in reservation["Instances"]})
        extra = sorted((also or set()) - found.keys() - exclude)
        if extra:
            for page in ec2.get_paginator("describe_instances").paginate(
                InstanceIds=extra, Filters=[{"Name": "instance-state-name", "Values": LIVE_STATES}]
            ):
                for reservation in page.get("Reservations", []):
                    found.update({i["InstanceId"]: i for i in reservation["Instances"]})
    return [i for iid, i in sorted(found.items()) if iid not in exclude]


def instance_row(instance: dict[str, Any]) -> dict[str, Any]:
    """What `describe` shows of an agent instance."""
    return {
        "instance_id": instance["InstanceId"],
        "type": instance.get("InstanceType"),
        "state": instance.get("State", {}).get("Name"),
        "pool": _tags(instance).get(POOL_TAG),
        "market": "spot" if instance.get("InstanceLifecycle") == "spot" else "on-demand",
        "private_ip": instance.get("PrivateIpAddress"),
        "launched": instance.get("LaunchTime"),
    }


def cancel_spot_requests(aws: AwsSession, request_ids: list[str], progress: Progress) -> None:
    if not request_ids:
        return
    with aws_errors("CancelSpotInstanceRequests"):
        aws.client("ec2").cancel_spot_instance_requests(SpotInstanceRequestIds=request_ids)
    progress.step(f"cancelled {len(request_ids)} spot request(s): {', '.join(request_ids)}")


def terminate_instances(aws: AwsSession, instance_ids: list[str], progress: Progress) -> None:
    """Terminate them and wait until every one is terminated (their network interfaces hold the agents'
    security group, which the stack deletes next)."""
    if not instance_ids:
        return
    ec2 = aws.client("ec2")
    with aws_errors("TerminateInstances"):
        ec2.terminate_instances(InstanceIds=instance_ids)
    progress.step(f"terminating {len(instance_ids)} agent instance(s): {', '.join(instance_ids)}")

    def all_terminated() -> bool | None:
        with aws_errors("DescribeInstances"):
            pages = ec2.get_paginator("describe_instances").paginate(InstanceIds=instance_ids)
            states = [i["State"]["Name"] for page in pages for r in page["Reservations"] for i in r["Instances"]]
        return True if all(s == "terminated" for s in states) else None

    wait_until(
        all_terminated,
        what=f"{len(instance_ids)} agent instance(s) to terminate",
        timeout_s=TERMINATE_WAIT_S,
        progress=progress,
    )
