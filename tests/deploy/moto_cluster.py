"""Shared by the tests that deploy on moto's CloudFormation (tests/deploy and tests/cli/test_deploy_*):
the SSM public parameters moto lacks, a network with a key pair, boto3 clients, `pedl deploy aws ...`
run through the CLI at the moto endpoint, and readers of what the stack made (security group rules,
IAM policy documents). Import the fixtures into a test module:

    from tests.deploy.moto_cluster import network_fixture  # noqa: F401
    from tests.support.moto_server import moto_endpoint_fixture, moto_server_fixture  # noqa: F401
"""

from __future__ import annotations

import ast
import datetime
import urllib.parse
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from click.testing import Result
from moto.cloudformation.models import Event, cloudformation_backends
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ssm.models import Parameter, ssm_backends
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.deploy.template import AGENT_AMI_PARAMETER, MASTER_AMI_PARAMETER
from tests.support.moto_server import REGION, MotoNetwork, make_network

SEED_EC2_ACTIONS = ["ec2:DescribeInstances", "ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances"]
SEED_SPOT_ACTIONS = ["ec2:CancelSpotInstanceRequests", "ec2:RequestSpotInstances", "ec2:DescribeSpotInstanceRequests"]


def publish_public_amis(image_id: str, region: str = REGION) -> None:
    """The SSM public parameters AWS publishes in every region, which moto lacks (and refuses to
    create through its API: /aws/ names are reserved), put straight into moto's in-process backend.
    Again with another image: a newer version of the parameter, as when AWS publishes a new AMI."""
    parameters = ssm_backends[DEFAULT_ACCOUNT_ID][region]._parameters
    for name in (MASTER_AMI_PARAMETER, AGENT_AMI_PARAMETER):
        versions = parameters[name]
        versions.append(
            Parameter(
                account_id=DEFAULT_ACCOUNT_ID,
                name=name,
                value=image_id,
                parameter_type="String",
                description=None,
                allowed_pattern=None,
                keyid=None,
                last_modified_date=datetime.datetime.now(),
                version=len(versions) + 1,
                data_type="aws:ec2:image",
            )
        )


@pytest.fixture(name="network")
def network_fixture(moto_endpoint: str) -> Iterator[MotoNetwork]:
    network = make_network(moto_endpoint)
    publish_public_amis(network.image_id)
    yield network


def client(endpoint: str, service: str, region: str = REGION) -> Any:
    return boto3.client(service, region_name=region, endpoint_url=endpoint)


def deploy_cli(endpoint: str, *args: str, input: str | None = None) -> Result:
    """`pedl deploy aws ARGS --endpoint-url ENDPOINT` (the command's own options come first in ARGS)."""
    return CliRunner().invoke(app, ["deploy", "aws", *args, "--endpoint-url", endpoint], input=input)


def _moto_stack(stack_name: str, region: str = REGION) -> Any:
    for stack in cloudformation_backends[DEFAULT_ACCOUNT_ID][region].stacks.values():
        if stack.name == stack_name:
            return stack
    raise AssertionError(f"no stack {stack_name}")


def set_stack_status(stack_name: str, status: str, region: str = REGION) -> None:
    """Put a stack in a status moto never reaches by itself (its CloudFormation cannot fail a create)."""
    _moto_stack(stack_name, region).status = status


def add_stack_event(
    stack_name: str, resource: str, resource_type: str, status: str, reason: str | None, region: str = REGION
) -> None:
    """An event of one resource (moto records only the stack's own)."""
    stack = _moto_stack(stack_name, region)
    stack.events.append(
        Event(
            stack_id=stack.stack_id,
            stack_name=stack.name,
            logical_resource_id=resource,
            physical_resource_id="",
            resource_type=resource_type,
            resource_status=status,
            resource_status_reason=reason,
            resource_properties=None,
        )
    )


def outputs_of(endpoint: str, stack_name: str) -> dict[str, str]:
    (stack,) = client(endpoint, "cloudformation").describe_stacks(StackName=stack_name)["Stacks"]
    return {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}


def physical_ids(endpoint: str, stack_name: str) -> dict[str, str]:
    summaries = client(endpoint, "cloudformation").list_stack_resources(StackName=stack_name)["StackResourceSummaries"]
    return {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in summaries}


def stack_names(endpoint: str) -> list[str]:
    return [s["StackName"] for s in client(endpoint, "cloudformation").describe_stacks()["Stacks"]]


def role_policy(endpoint: str, role: str, name: str) -> dict[str, Any]:
    document = client(endpoint, "iam").get_role_policy(RoleName=role, PolicyName=name)["PolicyDocument"]
    if isinstance(document, dict):
        return document
    # moto keeps a template's inline policy as the Python repr of the document, not as JSON
    return ast.literal_eval(urllib.parse.unquote(document))


def group_rules(permissions: list[dict[str, Any]], names: dict[str, str]) -> set[tuple[Any, ...]]:
    """(protocol, from port, to port, "cidr:..." or "sg:<logical id>") of each rule."""
    out = set()
    for p in permissions:
        for peer in p.get("IpRanges", []):
            out.add((p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), f"cidr:{peer['CidrIp']}"))
        for peer in p.get("UserIdGroupPairs", []):
            out.add((p["IpProtocol"], p.get("FromPort"), p.get("ToPort"), f"sg:{names[peer['GroupId']]}"))
    return out


def run_tagged_instances(
    endpoint: str, image_id: str, subnet_id: str, tags: dict[str, str], count: int = 1
) -> list[str]:
    """Instances as the master launches agents: tagged at launch."""
    reservation = client(endpoint, "ec2").run_instances(
        ImageId=image_id,
        MinCount=count,
        MaxCount=count,
        InstanceType="g5.xlarge",
        SubnetId=subnet_id,
        TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}],
    )
    return [i["InstanceId"] for i in reservation["Instances"]]


def instance_states(endpoint: str, instance_ids: list[str]) -> dict[str, str]:
    reservations = client(endpoint, "ec2").describe_instances(InstanceIds=instance_ids)["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in reservations for i in r["Instances"]}
