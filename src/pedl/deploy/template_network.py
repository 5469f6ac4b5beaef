"""The stack's network: a VPC with one public subnet (unless one is given) and the two security groups
of the seeds, plus the few rules the master needs to work at all, each listed and explained."""

from __future__ import annotations

from typing import Any

from pedl.deploy import logical_ids as ids
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_parts import get_att, ref, tags

VPC_CIDR = "10.42.0.0/16"
SUBNET_CIDR = "10.42.0.0/20"
DB_SUBNET_CIDRS = ("10.42.64.0/24", "10.42.65.0/24")  # two zones, as RDS requires; no route out
ALL_TCP = (0, 65535)
SSH_PORT = 22
POSTGRES_PORT = 5432
ANYWHERE = "0.0.0.0/0"


def availability_zone(options: DeployOptions) -> Any:
    """The zone of the master's subnet (and its data volume, which must be in the same zone)."""
    if options.availability_zone:
        return options.availability_zone
    if not options.creates_network:
        return ref(ids.AZ_PARAM)
    return _region_zone(0)


def _region_zone(index: int) -> dict[str, Any]:
    return {"Fn::Select": [index, {"Fn::GetAZs": ""}]}


def subnet_id(options: DeployOptions) -> Any:
    return options.subnet_id if options.subnet_id else ref(ids.SUBNET)


def vpc_id(options: DeployOptions) -> Any:
    return options.vpc_id if options.vpc_id else ref(ids.VPC)


def network_resources(options: DeployOptions) -> dict[str, Any]:
    """VPC, public subnet, internet gateway and default route; database subnets with db=rds."""
    if not options.creates_network:
        return {}
    name = f"pedl-{options.cluster_id}"
    out: dict[str, Any] = {
        ids.VPC: {
            "Type": "AWS::EC2::VPC",
            "Properties": {
                "CidrBlock": VPC_CIDR,
                "EnableDnsHostnames": True,
                "EnableDnsSupport": True,
                "Tags": tags(options, name),
            },
        },
        ids.SUBNET: {
            "Type": "AWS::EC2::Subnet",
            "Properties": {
                "VpcId": ref(ids.VPC),
                "CidrBlock": SUBNET_CIDR,
                "AvailabilityZone": availability_zone(options),
                "MapPublicIpOnLaunch": True,
                "Tags": tags(options, f"{name}-public"),
            },
        },
        ids.GATEWAY: {"Type": "AWS::EC2::InternetGateway", "Properties": {"Tags": tags(options, name)}},
        ids.GATEWAY_ATTACHMENT: {
            "Type": "AWS::EC2::VPCGatewayAttachment",
            "Properties": {"VpcId": ref(ids.VPC), "InternetGatewayId": ref(ids.GATEWAY)},
        },
        ids.ROUTE_TABLE: {
            "Type": "AWS::EC2::RouteTable",
            "Properties": {"VpcId": ref(ids.VPC), "Tags": tags(options, f"{name}-public")},
        },
        ids.DEFAULT_ROUTE: {
            "Type": "AWS::EC2::Route",
            "DependsOn": ids.GATEWAY_ATTACHMENT,
            "Properties": {
                "RouteTableId": ref(ids.ROUTE_TABLE),
                "DestinationCidrBlock": ANYWHERE,
                "GatewayId": ref(ids.GATEWAY),
            },
        },
        ids.SUBNET_ROUTES: {
            "Type": "AWS::EC2::SubnetRouteTableAssociation",
            "Properties": {"SubnetId": ref(ids.SUBNET), "RouteTableId": ref(ids.ROUTE_TABLE)},
        },
    }
    if options.db == "rds":
        for index, (key, cidr) in enumerate(zip((ids.DB_SUBNET_A, ids.DB_SUBNET_B), DB_SUBNET_CIDRS, strict=True)):
            out[key] = {
                "Type": "AWS::EC2::Subnet",
                "Properties": {
                    # the region's first two zones, whichever the master's is: RDS wants two different ones
                    "VpcId": ref(ids.VPC),
                    "CidrBlock": cidr,
                    "AvailabilityZone": _region_zone(index),
                    "Tags": tags(options, f"{name}-database"),
                },
            }
    return out


def _rule(port: tuple[int, int] | int, description: str, **peer: Any) -> dict[str, Any]:
    lo, hi = (port, port) if isinstance(port, int) else port
    return {"IpProtocol": "tcp", "FromPort": lo, "ToPort": hi, "Description": description, **peer}


def security_group_resources(options: DeployOptions) -> dict[str, Any]:
    """The seeds' rules. Master: inbound on the master port from the agents and from inbound_cidr,
    outbound on all TCP to the agents. Agents: inbound on all TCP from the master and from each other
    (distributed training), outbound on all TCP to the internet. Added, because the master cannot work
    without them: SSH from inbound_cidr (the seeds' installation logs in to the master), outbound HTTPS
    (EC2, S3 and Secrets Manager APIs, PyPI) and HTTP (the OS's package mirrors) from the master, and
    PostgreSQL from the master to the database with db=rds. Rules between two groups are resources of
    their own, so that neither group's definition refers to the other (a cycle CloudFormation refuses)."""
    port = options.port
    master, agents = get_att(ids.MASTER_SG, "GroupId"), get_att(ids.AGENT_SG, "GroupId")
    name = f"pedl-{options.cluster_id}"
    out: dict[str, Any] = {
        ids.MASTER_SG: {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": f"pedl master of cluster {options.cluster_id}",
                "VpcId": vpc_id(options),
                "SecurityGroupIngress": [
                    _rule(port, "pedl master API and WebUI from inbound_cidr", CidrIp=options.inbound_cidr),
                    _rule(SSH_PORT, "SSH to the master from inbound_cidr", CidrIp=options.inbound_cidr),
                ],
                "SecurityGroupEgress": [
                    _rule(443, "HTTPS: EC2, S3 and Secrets Manager APIs, PyPI", CidrIp=ANYWHERE),
                    _rule(80, "HTTP: the OS's package mirrors", CidrIp=ANYWHERE),
                ],
                "Tags": tags(options, f"{name}-master"),
            },
        },
        ids.AGENT_SG: {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": f"pedl agents of cluster {options.cluster_id}",
                "VpcId": vpc_id(options),
                "SecurityGroupEgress": [_rule(ALL_TCP, "agents to the internet (and the master)", CidrIp=ANYWHERE)],
                "Tags": tags(options, f"{name}-agents"),
            },
        },
        "MasterIngressFromAgents": {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": master,
                **_rule(port, "pedl master port from the agents", SourceSecurityGroupId=agents),
            },
        },
        "MasterEgressToAgents": {
            "Type": "AWS::EC2::SecurityGroupEgress",
            "Properties": {
                "GroupId": master,
                **_rule(ALL_TCP, "master to the agents", DestinationSecurityGroupId=agents),
            },
        },
        "AgentIngressFromMaster": {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {"GroupId": agents, **_rule(ALL_TCP, "master to the agents", SourceSecurityGroupId=master)},
        },
        "AgentIngressFromAgents": {
            "Type": "AWS::EC2::SecurityGroupIngress",
            "Properties": {
                "GroupId": agents,
                **_rule(ALL_TCP, "agents to each other (distributed training)", SourceSecurityGroupId=agents),
            },
        },
    }
    if options.db == "rds":
        database = get_att(ids.DB_SG, "GroupId")
        out[ids.DB_SG] = {
            "Type": "AWS::EC2::SecurityGroup",
            "Properties": {
                "GroupDescription": f"pedl database of cluster {options.cluster_id}",
                "VpcId": vpc_id(options),
                "SecurityGroupIngress": [
                    _rule(POSTGRES_PORT, "PostgreSQL from the pedl master", SourceSecurityGroupId=master)
                ],
                # no way out: an explicit rule replaces EC2's default allow-all egress
                "SecurityGroupEgress": [
                    {
                        "IpProtocol": "-1",
                        "CidrIp": "127.0.0.1/32",
                        "Description": "nothing: the database makes no connections",
                    }
                ],
                "Tags": tags(options, f"{name}-database"),
            },
        }
        out["MasterEgressToDatabase"] = {
            "Type": "AWS::EC2::SecurityGroupEgress",
            "Properties": {
                "GroupId": master,
                **_rule(POSTGRES_PORT, "master to its database", DestinationSecurityGroupId=database),
            },
        }
    return out
