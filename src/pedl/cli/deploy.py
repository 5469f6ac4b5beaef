"""`pedl deploy aws iam-policy` prints the master's minimal IAM policy, the seeds' own: the four EC2
calls, the three spot calls with --spot, and iam:PassRole on the agents' role when one is given (with
--deployer, the policy of whoever runs `up` and `down`: pedl/deploy/deployer_policy.py).
`pedl deploy aws print-template` prints the cluster's CloudFormation template (pedl/deploy/);
`up`, `down`, `list` and `describe` (cli/deploy_stack.py) make, remove and show the stack."""

from __future__ import annotations

import re
import sys
from typing import Any

import typer

from pedl.cli.deploy_options import (
    AgentAmi,
    AgentInstanceTypes,
    AvailabilityZone,
    ClusterId,
    Db,
    DbSubnetIds,
    ElasticIp,
    InboundCidr,
    Keypair,
    MasterInstanceType,
    MaxInstances,
    Package,
    Region,
    Spot,
    SubnetId,
    Tls,
    VpcId,
    deploy_options,
)
from pedl.cli.deploy_stack import describe_command, down_command, list_command, up_command
from pedl.cli.output import fail, print_json, warn
from pedl.deploy.options import DEFAULT_INBOUND_CIDR, DEFAULT_MASTER_INSTANCE_TYPE, DEFAULT_MAX_INSTANCES
from pedl.deploy.template_iam import master_ec2_actions

app = typer.Typer(no_args_is_help=True, help="Deployment helpers.")
aws_app = typer.Typer(no_args_is_help=True, help="Deploying on AWS.")
app.add_typer(aws_app, name="aws")
aws_app.command("up")(up_command)
aws_app.command("down")(down_command)
aws_app.command("list")(list_command)
aws_app.command("describe")(describe_command)

# arn:<partition>:iam::<account>:role/<path/name> or :instance-profile/<path/name>
_IAM_ARN = re.compile(r"^arn:aws(?:-[a-z]+)*:iam::\d{12}:(?P<kind>role|instance-profile)/[\w+=,.@/-]+$")


def iam_policy(*, spot: bool = False, agent_role_arn: str | None = None) -> dict[str, Any]:
    """The policy document; the actions are the ones the AWS provider is limited to."""
    actions = master_ec2_actions(spot)
    statements: list[dict[str, Any]] = [
        {"Sid": "PedlMasterManagesAgents", "Effect": "Allow", "Action": actions, "Resource": "*"}
    ]
    if agent_role_arn:
        statements.append(
            {
                "Sid": "PedlMasterPassesAgentRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": agent_role_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


@aws_app.command("iam-policy")
def iam_policy_command(
    spot: bool = typer.Option(False, "--spot", help="add the spot calls (for pools with spot: true)"),
    agent_role_arn: str | None = typer.Option(
        None,
        "--agent-role-arn",
        metavar="ARN",
        help="the agents' IAM role (iam_instance_profile_arn's role): adds iam:PassRole on it",
    ),
    deployer: bool = typer.Option(
        False, "--deployer", help="print instead the policy of whoever runs `pedl deploy aws up/down/list/describe`"
    ),
) -> None:
    """Print the IAM policy the master's role needs (JSON), or with --deployer the deployer's."""
    if deployer:
        if spot or agent_role_arn is not None:
            fail("--deployer: the deployer's policy takes neither --spot nor --agent-role-arn", code=2)
        from pedl.deploy.deployer_policy import deployer_policy

        print_json(deployer_policy())
        return
    if agent_role_arn is not None:
        agent_role_arn = agent_role_arn.strip()
        m = _IAM_ARN.match(agent_role_arn)
        if not m:
            fail(
                f"--agent-role-arn: {agent_role_arn!r} is not an IAM role ARN "
                "(arn:aws:iam::<12-digit account>:role/<name>) or instance profile ARN "
                "(arn:aws:iam::<account>:instance-profile/<name>)"
            )
        if m.group("kind") == "instance-profile":
            # PassRole is checked against the role inside the profile; the console names both alike
            agent_role_arn = agent_role_arn.replace(":instance-profile/", ":role/", 1)
            warn(
                f"iam:PassRole applies to roles, not instance profiles: using {agent_role_arn}, the role of "
                "the same name; give the role's ARN if the profile's role is named differently"
            )
    print_json(iam_policy(spot=spot, agent_role_arn=agent_role_arn))


@aws_app.command("print-template")
def print_template_command(
    cluster_id: ClusterId,
    keypair: Keypair,
    region: Region = None,
    master_instance_type: MasterInstanceType = DEFAULT_MASTER_INSTANCE_TYPE,
    agent_instance_types: AgentInstanceTypes = None,
    max_instances: MaxInstances = DEFAULT_MAX_INSTANCES,
    spot: Spot = False,
    agent_ami: AgentAmi = None,
    db: Db = "embedded",
    inbound_cidr: InboundCidr = DEFAULT_INBOUND_CIDR,
    vpc_id: VpcId = None,
    subnet_id: SubnetId = None,
    db_subnet_ids: DbSubnetIds = None,
    availability_zone: AvailabilityZone = None,
    tls: Tls = False,
    elastic_ip: ElasticIp = False,
    package: Package = None,
) -> None:
    """Print the CloudFormation template `up` would deploy (YAML), for review or your own tooling."""
    from pedl.deploy.template import build_template, template_yaml

    options = deploy_options(
        cluster_id=cluster_id,
        keypair=keypair,
        region=region,
        master_instance_type=master_instance_type,
        agent_instance_types=agent_instance_types,
        max_instances=max_instances,
        spot=spot,
        agent_ami=agent_ami,
        db=db,
        inbound_cidr=inbound_cidr,
        vpc_id=vpc_id,
        subnet_id=subnet_id,
        db_subnet_ids=db_subnet_ids,
        availability_zone=availability_zone,
        tls=tls,
        elastic_ip=elastic_ip,
        package=package,
    )
    sys.stdout.write(template_yaml(build_template(options)))
