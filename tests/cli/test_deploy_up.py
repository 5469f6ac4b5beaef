"""`pedl deploy aws up` against moto's CloudFormation (ThreadedMotoServer, real boto3 calls): it creates
the stack and shows its events and the master URL, uploads pedl's own wheel, pins the master's AMI,
updates in place, says when there is nothing to change, and refuses bad input before it creates anything.
moto's CloudFormation cannot update an EC2 instance (it drops it from the stack), so the updates here
change what the master instance does not hold; a change to the master is only asked about."""

from __future__ import annotations

import base64
from typing import Any

import pytest
import yaml

from pedl.common.package import own_wheel
from pedl.deploy import logical_ids as ids
from pedl.deploy.master_user_data import wheel_key
from pedl.deploy.template import MASTER_AMI_PARAMETER
from pedl.version import __version__
from tests.deploy.moto_cluster import (  # noqa: F401
    SEED_EC2_ACTIONS,
    client,
    deploy_cli,
    group_rules,
    network_fixture,
    outputs_of,
    physical_ids,
    publish_public_amis,
    role_policy,
    set_stack_status,
    stack_names,
)
from tests.support.moto_server import (  # noqa: F401
    MotoNetwork,
    make_network,
    moto_endpoint_fixture,
    moto_server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


def up(endpoint: str, network: MotoNetwork, *more: str, input: str | None = None) -> Any:
    return deploy_cli(endpoint, "up", "--cluster-id", "demo", "--keypair", network.key_name, *more, input=input)


def current_template(endpoint: str) -> dict[str, Any]:
    return yaml.safe_load(client(endpoint, "cloudformation").get_template(StackName="pedl-demo")["TemplateBody"])


def event_count(endpoint: str) -> int:
    return len(client(endpoint, "cloudformation").describe_stack_events(StackName="pedl-demo")["StackEvents"])


def test_up_creates_the_stack_shows_its_events_and_how_to_log_in(moto_endpoint: str, network: MotoNetwork) -> None:
    result = up(moto_endpoint, network, "--inbound-cidr", "203.0.113.0/24")
    assert result.exit_code == 0, result.output
    outputs = outputs_of(moto_endpoint, "pedl-demo")
    lines = result.stdout.splitlines()
    created = [i for i, line in enumerate(lines) if "pedl-demo" in line and "CREATE_" in line]
    assert "CREATE_IN_PROGRESS" in lines[created[0]] and "CREATE_COMPLETE" in lines[created[-1]]  # oldest first
    assert f"master: {outputs['MasterUrl']}" in lines
    assert f"  pedl -m {outputs['MasterUrl']} user login admin" in lines
    assert "waiting for the stack pedl-demo" in result.stderr  # progress while it waits
    (stack,) = client(moto_endpoint, "cloudformation").describe_stacks(StackName="pedl-demo")["Stacks"]
    assert {"Key": "pedl-cluster", "Value": "demo"} in stack["Tags"]

    # the security groups' ingress rules are the seeds' (+SSH); test_template checks egress, which moto skips
    names = {outputs["MasterSecurityGroupId"]: ids.MASTER_SG, outputs["AgentSecurityGroupId"]: ids.AGENT_SG}
    groups = {
        names[g["GroupId"]]: g
        for g in client(moto_endpoint, "ec2").describe_security_groups(GroupIds=list(names))["SecurityGroups"]
    }
    assert group_rules(groups[ids.MASTER_SG]["IpPermissions"], names) == {
        ("tcp", 8080, 8080, f"sg:{ids.AGENT_SG}"),
        ("tcp", 8080, 8080, "cidr:203.0.113.0/24"),
        ("tcp", 22, 22, "cidr:203.0.113.0/24"),
    }
    assert group_rules(groups[ids.AGENT_SG]["IpPermissions"], names) == {
        ("tcp", 0, 65535, f"sg:{ids.MASTER_SG}"),
        ("tcp", 0, 65535, f"sg:{ids.AGENT_SG}"),
    }

    # the master's role: exactly the seeds' EC2 actions, PassRole on the agents' role only
    resources = physical_ids(moto_endpoint, "pedl-demo")
    statements = {
        s["Sid"]: s for s in role_policy(moto_endpoint, resources[ids.MASTER_ROLE], "pedl-master")["Statement"]
    }
    assert statements["PedlMasterManagesAgents"]["Action"] == SEED_EC2_ACTIONS
    assert statements["PedlMasterPassesAgentRole"]["Resource"] == outputs["AgentRoleArn"]
    assert not any(
        a.startswith("ec2:")
        for s in statements.values()
        if s["Sid"] != "PedlMasterManagesAgents"
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    )


def test_up_uploads_pedl_s_own_wheel_that_the_master_installs(moto_endpoint: str, network: MotoNetwork) -> None:
    result = up(moto_endpoint, network)
    assert result.exit_code == 0, result.output
    outputs = outputs_of(moto_endpoint, "pedl-demo")
    wheel = own_wheel()
    key = wheel_key(__version__)
    body = client(moto_endpoint, "s3").get_object(Bucket=outputs["CheckpointBucket"], Key=key)
    assert body["Body"].read() == wheel.data and body["Metadata"]["sha256"] == wheel.sha256
    assert f"s3://{outputs['CheckpointBucket']}/{key}" in result.stdout
    user_data = base64.b64decode(
        client(moto_endpoint, "ec2").describe_instance_attribute(
            InstanceId=outputs["MasterInstanceId"], Attribute="userData"
        )["UserData"]["Value"]
    ).decode()
    assert f"WHEEL_BUCKET={outputs['CheckpointBucket']}\n" in user_data
    assert f"WHEEL_KEY={key}\n" in user_data and f"WHEEL_SHA256={wheel.sha256}\n" in user_data


def test_up_pins_the_master_ami_so_that_updates_keep_the_instance(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network).exit_code == 0
    parameter = current_template(moto_endpoint)["Parameters"][ids.MASTER_IMAGE_PARAM]
    assert parameter == {
        "Type": "AWS::EC2::Image::Id",
        "Default": network.image_id,
        "Description": parameter["Description"],
    }
    # AWS publishes a newer Ubuntu image: `up` again keeps the master's (a new one would replace it)
    newer = client(moto_endpoint, "ec2").register_image(Name="ubuntu-newer", RootDeviceName="/dev/sda1")["ImageId"]
    publish_public_amis(newer)
    parameter = client(moto_endpoint, "ssm").get_parameter(Name=MASTER_AMI_PARAMETER)["Parameter"]
    assert parameter["Value"] == newer  # what an unpinned template would resolve now
    result = up(moto_endpoint, network)
    assert result.exit_code == 0, result.output
    assert "already up to date" in result.stdout
    assert current_template(moto_endpoint)["Parameters"][ids.MASTER_IMAGE_PARAM]["Default"] == network.image_id


def test_up_again_with_a_change_updates_in_place(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network, "--inbound-cidr", "203.0.113.0/24").exit_code == 0
    master = outputs_of(moto_endpoint, "pedl-demo")["MasterInstanceId"]
    result = up(moto_endpoint, network, "--inbound-cidr", "198.51.100.0/24")  # no question: the master stays
    assert result.exit_code == 0, result.output
    assert "updating the stack pedl-demo" in result.stdout and "UPDATE_COMPLETE" in result.stdout
    assert "CREATE_IN_PROGRESS" not in result.stdout  # only the update's events
    outputs = outputs_of(moto_endpoint, "pedl-demo")
    assert outputs["MasterInstanceId"] == master
    (group,) = client(moto_endpoint, "ec2").describe_security_groups(GroupIds=[outputs["MasterSecurityGroupId"]])[
        "SecurityGroups"
    ]
    cidrs = {r["CidrIp"] for p in group["IpPermissions"] for r in p.get("IpRanges", [])}
    assert cidrs == {"198.51.100.0/24"}


def test_up_with_no_change_is_already_up_to_date(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network).exit_code == 0
    events = event_count(moto_endpoint)
    result = up(moto_endpoint, network)
    assert result.exit_code == 0, result.output
    assert "the stack pedl-demo is already up to date" in result.stdout
    assert event_count(moto_endpoint) == events  # no UpdateStack call at all


def test_an_update_that_restarts_the_master_asks_first(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network).exit_code == 0
    before = current_template(moto_endpoint)
    result = up(moto_endpoint, network, "--max-instances", "9", input="n\n")
    assert result.exit_code == 1
    assert "restarts the master of demo (its UserData change)" in result.stdout
    assert "aborted: nothing was changed" in result.stderr
    assert current_template(moto_endpoint) == before


def test_a_change_that_would_replace_the_master_is_refused(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network).exit_code == 0
    client(moto_endpoint, "ec2").create_key_pair(KeyName="other-key", KeyType="ed25519")
    before = current_template(moto_endpoint)
    result = deploy_cli(moto_endpoint, "up", "--cluster-id", "demo", "--keypair", "other-key", "--yes")
    assert result.exit_code == 1
    assert "--keypair" in result.stderr and "replaces the master instance" in result.stderr
    assert current_template(moto_endpoint) == before


def test_a_missing_keypair_is_named_and_nothing_is_created(moto_endpoint: str, network: MotoNetwork) -> None:
    result = deploy_cli(moto_endpoint, "up", "--cluster-id", "demo", "--keypair", "no-such-key")
    assert result.exit_code == 1
    assert "--keypair: no key pair named 'no-such-key' in us-east-1" in result.stderr
    assert stack_names(moto_endpoint) == []
    assert client(moto_endpoint, "s3").list_buckets()["Buckets"] == []


def test_an_instance_type_the_region_lacks_is_named(moto_endpoint: str) -> None:
    """moto's offerings data (from AWS) has no p4d.24xlarge in eu-south-2; t3.bogus is nowhere."""
    network = make_network(moto_endpoint, "eu-south-2")
    result = deploy_cli(
        moto_endpoint,
        "up",
        "--cluster-id",
        "demo",
        "--keypair",
        network.key_name,
        "--region",
        "eu-south-2",
        "--agent-instance-type",
        "g5.xlarge",
        "--agent-instance-type",
        "p4d.24xlarge",
        "--master-instance-type",
        "t3.bogus",
    )
    assert result.exit_code == 1
    assert "--master-instance-type: t3.bogus is not offered in eu-south-2" in result.stderr
    assert "--agent-instance-type: p4d.24xlarge is not offered in eu-south-2" in result.stderr
    assert "g5.xlarge" not in result.stderr
    assert stack_names(moto_endpoint) == [] and client(moto_endpoint, "s3").list_buckets()["Buckets"] == []


def test_an_invalid_cidr_is_named_before_any_aws_call(moto_endpoint: str, network: MotoNetwork) -> None:
    result = up(moto_endpoint, network, "--inbound-cidr", "10.0.0.0/33")
    assert result.exit_code == 2 and "--inbound-cidr" in result.stderr
    assert stack_names(moto_endpoint) == []


def test_a_stack_in_rollback_complete_says_to_run_down_first(moto_endpoint: str, network: MotoNetwork) -> None:
    assert up(moto_endpoint, network).exit_code == 0
    set_stack_status("pedl-demo", "ROLLBACK_COMPLETE")  # a failed creation (moto cannot fail one)
    before, events = current_template(moto_endpoint), event_count(moto_endpoint)
    result = up(moto_endpoint, network, "--inbound-cidr", "198.51.100.0/24")
    assert result.exit_code == 1
    assert "the stack pedl-demo is ROLLBACK_COMPLETE" in result.stderr
    assert "pedl deploy aws down --cluster-id demo" in result.stderr
    assert current_template(moto_endpoint) == before and event_count(moto_endpoint) == events


def test_a_stack_pedl_did_not_make_is_left_alone(moto_endpoint: str, network: MotoNetwork) -> None:
    client(moto_endpoint, "cloudformation").create_stack(
        StackName="pedl-demo", TemplateBody=yaml.safe_dump({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})
    )
    result = up(moto_endpoint, network)
    assert result.exit_code == 1 and "was not made by pedl" in result.stderr


def test_tls_says_where_the_ca_is_published(moto_endpoint: str, network: MotoNetwork) -> None:
    result = up(moto_endpoint, network, "--tls")
    assert result.exit_code == 0, result.output
    outputs = outputs_of(moto_endpoint, "pedl-demo")
    assert outputs["MasterUrl"].startswith("https://")
    assert f"aws s3 cp {outputs['CaCertificateUrl']} pedl-demo-ca.crt --region us-east-1" in result.stdout
    assert f"pedl -m {outputs['MasterUrl']} --cert pedl-demo-ca.crt user login admin" in result.stdout
