"""The command-line options of `pedl deploy aws up` and `print-template`, declared once: annotated
parameter types both commands use (and `down`, `list`, `describe` their share), and the DeployOptions
they make (a bad option fails naming it)."""

from __future__ import annotations

from typing import Annotated

import typer

from pedl.cli.output import fail
from pedl.deploy.options import (
    DEFAULT_AGENT_INSTANCE_TYPES,
    DEFAULT_INBOUND_CIDR,
    DEFAULT_MASTER_INSTANCE_TYPE,
    DEFAULT_MAX_INSTANCES,
    DeployOptionError,
    DeployOptions,
)

ClusterId = Annotated[
    str,
    typer.Option(
        "--cluster-id",
        metavar="ID",
        help="names the stack (pedl-ID) and tags every resource and agent with pedl-cluster=ID",
    ),
]
Keypair = Annotated[str, typer.Option("--keypair", metavar="NAME", help="EC2 key pair of the master and agents")]
Region = Annotated[
    str | None, typer.Option("--region", metavar="REGION", help="AWS region (default: the AWS configuration's)")
]
MasterInstanceType = Annotated[
    str, typer.Option("--master-instance-type", metavar="TYPE", help="the master's instance type")
]
AgentInstanceTypes = Annotated[
    list[str] | None,
    typer.Option(
        "--agent-instance-type",
        metavar="TYPE",
        help=f"an agents' GPU instance type; repeat for several, in order of preference "
        f"(default: {', '.join(DEFAULT_AGENT_INSTANCE_TYPES)})",
    ),
]
MaxInstances = Annotated[int, typer.Option("--max-instances", metavar="N", help="most agent instances at once")]
Spot = Annotated[bool, typer.Option("--spot", help="launch agents as spot instances (on-demand fallback)")]
AgentAmi = Annotated[
    str | None,
    typer.Option(
        "--agent-ami",
        metavar="AMI",
        help="the agents' AMI (default: the region's AWS Deep Learning Base GPU AMI, Ubuntu 24.04)",
    ),
]
Db = Annotated[
    str,
    typer.Option(
        "--db",
        metavar="embedded|rds",
        help="embedded: SQLite on the master's data volume; rds: an RDS PostgreSQL instance",
    ),
]
InboundCidr = Annotated[
    str, typer.Option("--inbound-cidr", metavar="CIDR", help="who may reach the master's port and SSH")
]
VpcId = Annotated[str | None, typer.Option("--vpc-id", metavar="VPC", help="an existing VPC (with --subnet-id)")]
SubnetId = Annotated[
    str | None,
    typer.Option("--subnet-id", metavar="SUBNET", help="a public subnet of --vpc-id for the master and agents"),
]
DbSubnetIds = Annotated[
    list[str] | None,
    typer.Option(
        "--db-subnet-id",
        metavar="SUBNET",
        help="with --db rds and --vpc-id: the database's subnets, two or more in different zones",
    ),
]
AvailabilityZone = Annotated[
    str | None,
    typer.Option(
        "--availability-zone", metavar="AZ", help="the zone of the master's subnet (with --subnet-id: its zone)"
    ),
]
Tls = Annotated[
    bool, typer.Option("--tls", help="serve HTTPS on 8443 with a certificate made on the master at first boot")
]
ElasticIp = Annotated[bool, typer.Option("--elastic-ip", help="give the master an Elastic IP")]
EndpointUrl = Annotated[
    str | None,
    typer.Option(
        "--endpoint-url",
        metavar="URL",
        help="send every AWS call (CloudFormation, EC2, S3, IAM, SSM) to this endpoint: moto or LocalStack",
    ),
]
Yes = Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")]
Package = Annotated[
    str | None,
    typer.Option(
        "--package", metavar="SPEC", hidden=True, help="what the master pip-installs instead of pedl==VERSION (tests)"
    ),
]


def deploy_options(
    *,
    cluster_id: str,
    keypair: str,
    region: str | None = None,
    master_instance_type: str = DEFAULT_MASTER_INSTANCE_TYPE,
    agent_instance_types: list[str] | None = None,
    max_instances: int = DEFAULT_MAX_INSTANCES,
    spot: bool = False,
    agent_ami: str | None = None,
    db: str = "embedded",
    inbound_cidr: str = DEFAULT_INBOUND_CIDR,
    vpc_id: str | None = None,
    subnet_id: str | None = None,
    db_subnet_ids: list[str] | None = None,
    availability_zone: str | None = None,
    tls: bool = False,
    elastic_ip: bool = False,
    package: str | None = None,
) -> DeployOptions:
    """DeployOptions from the command line's values; a bad one ends the command with its message."""
    try:
        return DeployOptions(
            cluster_id=cluster_id,
            keypair=keypair,
            region=region,
            master_instance_type=master_instance_type,
            agent_instance_types=tuple(agent_instance_types or DEFAULT_AGENT_INSTANCE_TYPES),
            max_instances=max_instances,
            spot=spot,
            agent_ami=agent_ami,
            db=db,  # pyright: ignore[reportArgumentType]  # any string: DeployOptions refuses all but embedded, rds
            inbound_cidr=inbound_cidr,
            vpc_id=vpc_id,
            subnet_id=subnet_id,
            db_subnet_ids=tuple(db_subnet_ids or ()),
            availability_zone=availability_zone,
            tls=tls,
            elastic_ip=elastic_ip,
            package=package,
        )
    except DeployOptionError as exc:
        fail(str(exc), code=2)
