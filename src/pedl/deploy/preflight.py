"""What `up` checks in the region before it creates or changes anything: the key pair exists, every
instance type is offered, a given subnet is in the given VPC (its zone becomes the data volume's), and
the master's AMI, resolved once from its SSM parameter so that later updates keep it."""

from __future__ import annotations

import dataclasses

from botocore.exceptions import BotoCoreError, ClientError

from pedl.deploy.aws_session import AwsSession, DeployError, aws_errors, error_code, error_message
from pedl.deploy.options import DeployOptions
from pedl.deploy.template import MASTER_AMI_PARAMETER


def check_keypair(aws: AwsSession, name: str) -> DeployError | None:
    try:
        aws.client("ec2").describe_key_pairs(KeyNames=[name])
    except ClientError as exc:
        if error_code(exc) == "InvalidKeyPair.NotFound":
            return DeployError(
                f"no key pair named {name!r} in {aws.region}: import yours (aws ec2 import-key-pair "
                f"--region {aws.region} --key-name {name} --public-key-material fileb://~/.ssh/id_ed25519"
                ".pub) or create one (aws ec2 create-key-pair)",
                option="keypair",
            )
        return DeployError(f"cannot look up the key pair {name!r}: {error_message(exc)}", option="keypair")
    return None


def check_instance_types(aws: AwsSession, options: DeployOptions) -> list[DeployError]:
    wanted = {options.master_instance_type: "master-instance-type"}
    for name in options.agent_instance_types:
        wanted.setdefault(name, "agent-instance-type")
    with aws_errors("DescribeInstanceTypeOfferings"):
        pages = (
            aws.client("ec2")
            .get_paginator("describe_instance_type_offerings")
            .paginate(LocationType="region", Filters=[{"Name": "instance-type", "Values": sorted(wanted)}])
        )
        offered = {o["InstanceType"] for page in pages for o in page.get("InstanceTypeOfferings", [])}
    return [
        DeployError(f"{name} is not offered in {aws.region}; choose another type or --region", option=option)
        for name, option in wanted.items()
        if name not in offered
    ]


def with_subnet_zone(aws: AwsSession, options: DeployOptions) -> DeployOptions:
    """A given subnet: it must be in --vpc-id; its zone is the data volume's (and --availability-zone's)."""
    if options.subnet_id is None:
        return options
    try:
        (subnet,) = aws.client("ec2").describe_subnets(SubnetIds=[options.subnet_id])["Subnets"]
    except ClientError as exc:
        if error_code(exc).startswith("InvalidSubnet"):
            raise DeployError(f"no subnet {options.subnet_id} in {aws.region}", option="subnet-id") from None
        raise DeployError(f"cannot look up {options.subnet_id}: {error_message(exc)}", option="subnet-id") from None
    if subnet["VpcId"] != options.vpc_id:
        raise DeployError(f"{options.subnet_id} is in {subnet['VpcId']}, not in {options.vpc_id}", option="vpc-id")
    zone = subnet["AvailabilityZone"]
    if options.availability_zone and options.availability_zone != zone:
        raise DeployError(
            f"{options.subnet_id} is in {zone}, not {options.availability_zone}", option="availability-zone"
        )
    return dataclasses.replace(options, availability_zone=zone)


def preflight(aws: AwsSession, options: DeployOptions) -> tuple[DeployOptions, list[DeployError]]:
    """Every problem found, so that one run lists them all; the options with the subnet's zone."""
    problems = [p for p in [check_keypair(aws, options.keypair)] if p is not None]
    problems += check_instance_types(aws, options)
    try:
        options = with_subnet_zone(aws, options)
    except DeployError as exc:
        problems.append(exc)
    return options, problems


def resolve_master_image(aws: AwsSession) -> str:
    """The master's AMI in this region now: the image id the stack keeps for good."""
    try:
        value = aws.client("ssm").get_parameter(Name=MASTER_AMI_PARAMETER)["Parameter"]["Value"]
    except (ClientError, BotoCoreError) as exc:
        raise DeployError(
            f"cannot resolve the master's AMI from the SSM parameter {MASTER_AMI_PARAMETER} in "
            f"{aws.region}: {error_message(exc)}"
        ) from None
    if not str(value).startswith("ami-"):
        raise DeployError(f"the SSM parameter {MASTER_AMI_PARAMETER} holds {value!r}, not an AMI id")
    return str(value)
