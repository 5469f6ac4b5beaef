"""What `pedl deploy aws list` and `describe` show of the region's clusters, as plain dicts (JSON-ready):
the stack's status and outputs, the master URL, and the agent instances carrying the tag pair."""

from __future__ import annotations

from typing import Any

from pedl.deploy.aws_session import AwsSession
from pedl.deploy.cluster_instances import agent_instances, instance_row, spot_requests
from pedl.deploy.stacks import ClusterStack, list_stacks, require_stack


def cluster_summary(stack: ClusterStack) -> dict[str, Any]:
    return {
        "cluster_id": stack.cluster_id,
        "status": stack.status,
        "master_url": stack.master_url,
        "created": stack.created,
        "stack": stack.name,
    }


def list_clusters(aws: AwsSession) -> list[dict[str, Any]]:
    return [cluster_summary(s) for s in list_stacks(aws)]


def describe_cluster(aws: AwsSession, cluster_id: str) -> dict[str, Any]:
    stack = require_stack(aws, cluster_id)
    master = stack.outputs.get("MasterInstanceId")
    requests = spot_requests(aws, cluster_id)
    agents = agent_instances(
        aws,
        cluster_id,
        exclude={master} if master else set(),
        also={r["InstanceId"] for r in requests if r.get("InstanceId")},
    )
    return {
        **cluster_summary(stack),
        "reason": stack.reason,
        "region": aws.region,
        "pedl_version": stack.outputs.get("PedlVersion"),
        "outputs": dict(sorted(stack.outputs.items())),
        "agents": [instance_row(i) for i in agents],
        "spot_requests": [
            {"id": r["SpotInstanceRequestId"], "state": r.get("State"), "instance_id": r.get("InstanceId")}
            for r in requests
        ],
    }
