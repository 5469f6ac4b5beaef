"""The clusters' stacks as `pedl deploy aws` reads them: a stack is a cluster's when it is named
pedl-ID and carries the tag pedl-cluster=ID; its status, outputs, template, resources and the master
AMI it was created with."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import yaml
from botocore.exceptions import ClientError

from pedl.deploy import logical_ids as ids
from pedl.deploy.aws_session import AwsSession, DeployError, aws_errors, error_code
from pedl.deploy.options import STACK_PREFIX, TAG_KEY, stack_name

# what CloudFormation can only delete: a failed creation, or a failed rollback or deletion
ONLY_DELETABLE = frozenset({"ROLLBACK_COMPLETE", "ROLLBACK_FAILED", "CREATE_FAILED", "DELETE_FAILED"})


@dataclass(frozen=True)
class ClusterStack:
    cluster_id: str
    stack_id: str
    name: str
    status: str
    reason: str | None
    created: datetime | None
    outputs: dict[str, str]
    parameters: dict[str, str]  # the resolved value of an SSM-typed parameter
    tags: dict[str, str]

    @property
    def master_url(self) -> str | None:
        return self.outputs.get("MasterUrl")

    @property
    def busy(self) -> bool:
        return self.status.endswith("_IN_PROGRESS")


def _parameters(description: dict[str, Any]) -> dict[str, str]:
    return {
        p["ParameterKey"]: p.get("ResolvedValue") or p.get("ParameterValue", "")
        for p in description.get("Parameters") or []
    }


def cluster_stack(description: dict[str, Any]) -> ClusterStack | None:
    """The cluster of a DescribeStacks entry, or None when pedl did not make the stack."""
    name = description["StackName"]
    tags = {t["Key"]: t["Value"] for t in description.get("Tags") or []}
    cluster_id = name.removeprefix(STACK_PREFIX)
    if not name.startswith(STACK_PREFIX) or tags.get(TAG_KEY) != cluster_id:
        return None
    return ClusterStack(
        cluster_id=cluster_id,
        stack_id=description["StackId"],
        name=name,
        status=description["StackStatus"],
        reason=description.get("StackStatusReason"),
        created=description.get("CreationTime"),
        outputs={o["OutputKey"]: o.get("OutputValue", "") for o in description.get("Outputs") or []},
        parameters=_parameters(description),
        tags=tags,
    )


def describe_stack(aws: AwsSession, name_or_id: str) -> dict[str, Any] | None:
    """DescribeStacks' entry, or None when there is no such stack (by id: also a deleted one's)."""
    try:
        (description,) = aws.client("cloudformation").describe_stacks(StackName=name_or_id)["Stacks"]
    except ClientError as exc:
        if error_code(exc) == "ValidationError" and "does not exist" in str(exc):
            return None
        with aws_errors(f"DescribeStacks {name_or_id}"):
            raise
    return description


def find_stack(aws: AwsSession, cluster_id: str) -> ClusterStack | None:
    """The cluster's stack, None when there is none; a DeployError when a stack of that name is not pedl's."""
    description = describe_stack(aws, stack_name(cluster_id))
    if description is None:
        return None
    stack = cluster_stack(description)
    if stack is None:
        raise DeployError(
            f"the stack {description['StackName']} in {aws.region} was not made by pedl (it lacks the "
            f"tag {TAG_KEY}={cluster_id}); pedl leaves it alone: choose another cluster id",
            option="cluster-id",
        )
    return stack


def require_stack(aws: AwsSession, cluster_id: str) -> ClusterStack:
    stack = find_stack(aws, cluster_id)
    if stack is None:
        raise DeployError(
            f"no cluster {cluster_id!r} in {aws.region}: there is no stack {stack_name(cluster_id)} "
            "(`pedl deploy aws list` shows the region's clusters; --region picks another)",
            option="cluster-id",
        )
    return stack


def list_stacks(aws: AwsSession) -> list[ClusterStack]:
    """Every cluster of the region, oldest first."""
    with aws_errors("DescribeStacks"):
        pages = aws.client("cloudformation").get_paginator("describe_stacks").paginate()
        found = [cluster_stack(d) for page in pages for d in page.get("Stacks", [])]
    clusters = [s for s in found if s is not None]
    return sorted(clusters, key=lambda s: (s.created is None, s.created or datetime.min, s.name))


def stack_template(aws: AwsSession, stack: ClusterStack) -> dict[str, Any]:
    """The template the stack runs now, as a dict."""
    with aws_errors(f"GetTemplate {stack.name}"):
        body = aws.client("cloudformation").get_template(StackName=stack.stack_id)["TemplateBody"]
    if isinstance(body, dict):
        return body
    try:
        template = yaml.safe_load(body)
    except yaml.YAMLError:
        template = None
    if not isinstance(template, dict):
        raise DeployError(f"the template of {stack.name} is not one pedl writes; update it with your own tools")
    return template


def stack_resources(aws: AwsSession, stack_id: str) -> dict[str, str]:
    """Physical id by logical id, of the resources the stack has made."""
    with aws_errors("ListStackResources"):
        pages = aws.client("cloudformation").get_paginator("list_stack_resources").paginate(StackName=stack_id)
        return {
            r["LogicalResourceId"]: r.get("PhysicalResourceId", "")
            for page in pages
            for r in page.get("StackResourceSummaries", [])
        }


def pinned_master_image(aws: AwsSession, stack: ClusterStack) -> str | None:
    """The master's AMI of the stack: its parameter's value (resolved, for an SSM parameter), else the
    running master's image; None when neither is known."""
    value = stack.parameters.get(ids.MASTER_IMAGE_PARAM, "")
    if value.startswith("ami-"):
        return value
    instance_id = stack.outputs.get("MasterInstanceId")
    if not instance_id:
        return None
    with aws_errors(f"DescribeInstances {instance_id}"):
        reservations = aws.client("ec2").describe_instances(InstanceIds=[instance_id])["Reservations"]
    images = [i["ImageId"] for r in reservations for i in r["Instances"]]
    return images[0] if images else None
