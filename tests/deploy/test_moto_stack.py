"""The template deployed on moto's CloudFormation (ThreadedMotoServer), checked through boto3. moto
implements a subset of CloudFormation: it skips AWS::EC2::SecurityGroupEgress,
AWS::SecretsManager::Secret and AWS::EC2::EIPAssociation (with a warning), ignores a security group's
inline egress rules, an EC2 volume's tags and an instance's NetworkInterfaces, and creates the rest."""

from __future__ import annotations

import base64

import pytest

from pedl.deploy import logical_ids as ids
from pedl.deploy.options import DeployOptions
from pedl.deploy.template import build_template, template_yaml
from tests.deploy.moto_cluster import (  # noqa: F401
    SEED_EC2_ACTIONS,
    SEED_SPOT_ACTIONS,
    client,
    network_fixture,
    role_policy,
)
from tests.deploy.moto_cluster import group_rules as _rules
from tests.support.moto_server import (  # noqa: F401
    MotoNetwork,
    moto_endpoint_fixture,
    moto_server_fixture,
)

# moto warns of each resource type it skips (listed here), from its server's thread
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")

MOTO_UNSUPPORTED = {"AWS::EC2::SecurityGroupEgress", "AWS::SecretsManager::Secret", "AWS::EC2::EIPAssociation"}


def deploy(endpoint: str, options: DeployOptions) -> tuple[dict[str, str], dict[str, str], set[str]]:
    """Create the stack; (outputs, physical ids by logical id, types moto skipped)."""
    cfn = client(endpoint, "cloudformation")
    template = build_template(options)
    cfn.create_stack(
        StackName=options.stack_name, TemplateBody=template_yaml(template), Capabilities=["CAPABILITY_IAM"]
    )
    (stack,) = cfn.describe_stacks(StackName=options.stack_name)["Stacks"]
    assert stack["StackStatus"] == "CREATE_COMPLETE", stack.get("StackStatusReason")
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stack.get("Outputs", [])}
    resources = cfn.describe_stack_resources(StackName=options.stack_name)["StackResources"]
    physical = {r["LogicalResourceId"]: r.get("PhysicalResourceId", "") for r in resources if "LogicalResourceId" in r}
    skipped = {r["Type"] for name, r in template["Resources"].items() if name not in physical}
    return outputs, physical, skipped


def test_the_default_stack_on_moto(moto_endpoint: str, network: MotoNetwork) -> None:
    options = DeployOptions(cluster_id="demo", keypair=network.key_name, inbound_cidr="203.0.113.0/24")
    outputs, physical, skipped = deploy(moto_endpoint, options)
    assert skipped <= MOTO_UNSUPPORTED, f"moto skipped {skipped - MOTO_UNSUPPORTED} too"
    ec2, iam, s3 = (client(moto_endpoint, s) for s in ("ec2", "iam", "s3"))

    # the master instance: tagged, with the data volume attached and its id in the user data
    (reservation,) = ec2.describe_instances(InstanceIds=[outputs["MasterInstanceId"]])["Reservations"]
    (instance,) = reservation["Instances"]
    tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
    assert tags["pedl-cluster"] == "demo" and instance["InstanceType"] == "t3.medium"
    assert instance["KeyName"] == network.key_name and instance["ImageId"] == network.image_id
    (volume,) = ec2.describe_volumes(VolumeIds=[outputs["DataVolumeId"]])["Volumes"]
    assert volume["Size"] >= 100  # (moto leaves a volume's Tags property out; test_template checks it)
    assert [a["InstanceId"] for a in volume["Attachments"]] == [instance["InstanceId"]]
    user_data = base64.b64decode(
        ec2.describe_instance_attribute(InstanceId=instance["InstanceId"], Attribute="userData")["UserData"]["Value"]
    ).decode()
    assert f"VOLUME_ID={volume['VolumeId']}\n" in user_data
    assert f"bucket: {outputs['CheckpointBucket']}\n" in user_data
    assert f"image_id: {network.image_id}\n" in user_data
    assert f"security_group_id: {outputs['AgentSecurityGroupId']}\n" in user_data
    assert f"iam_instance_profile_arn: {outputs['AgentInstanceProfileArn']}\n" in user_data
    assert "${" not in user_data and "password" not in user_data

    # the security groups moto made: every ingress rule of the seeds (+SSH). moto keeps EC2's default
    # allow-all egress (it skips SecurityGroupEgress, inline or not): test_template checks egress.
    names = {outputs["MasterSecurityGroupId"]: ids.MASTER_SG, outputs["AgentSecurityGroupId"]: ids.AGENT_SG}
    groups = {names[g["GroupId"]]: g for g in ec2.describe_security_groups(GroupIds=list(names))["SecurityGroups"]}
    assert _rules(groups[ids.MASTER_SG]["IpPermissions"], names) == {
        ("tcp", 8080, 8080, f"sg:{ids.AGENT_SG}"),
        ("tcp", 8080, 8080, "cidr:203.0.113.0/24"),
        ("tcp", 22, 22, "cidr:203.0.113.0/24"),
    }
    assert _rules(groups[ids.AGENT_SG]["IpPermissions"], names) == {
        ("tcp", 0, 65535, f"sg:{ids.MASTER_SG}"),
        ("tcp", 0, 65535, f"sg:{ids.AGENT_SG}"),
    }

    # IAM: the master's EC2 actions are the seeds'; PassRole names the agents' role
    master_role = physical[ids.MASTER_ROLE]
    document = role_policy(moto_endpoint, master_role, "pedl-master")
    statements = {s["Sid"]: s for s in document["Statement"]}
    assert statements["PedlMasterManagesAgents"]["Action"] == SEED_EC2_ACTIONS
    assert statements["PedlMasterPassesAgentRole"]["Resource"] == outputs["AgentRoleArn"]
    agent_doc = role_policy(moto_endpoint, physical[ids.AGENT_ROLE], "pedl-agent")
    bucket_arn = f"arn:aws:s3:::{outputs['CheckpointBucket']}"
    assert {s["Resource"] for s in agent_doc["Statement"]} == {bucket_arn, f"{bucket_arn}/*"}
    profile = iam.get_instance_profile(InstanceProfileName=physical[ids.AGENT_PROFILE])["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [physical[ids.AGENT_ROLE]]

    tag_set = s3.get_bucket_tagging(Bucket=outputs["CheckpointBucket"])["TagSet"]
    assert {"Key": "pedl-cluster", "Value": "demo"} in tag_set


def test_rds_tls_spot_and_an_elastic_ip_on_moto(moto_endpoint: str, network: MotoNetwork) -> None:
    options = DeployOptions(cluster_id="full", keypair=network.key_name, db="rds", tls=True, spot=True, elastic_ip=True)
    outputs, physical, skipped = deploy(moto_endpoint, options)
    assert skipped <= MOTO_UNSUPPORTED
    assert outputs["MasterUrl"].startswith("https://") and outputs["MasterUrl"].endswith(":8443")
    (db,) = client(moto_endpoint, "rds").describe_db_instances(DBInstanceIdentifier=physical[ids.DATABASE])[
        "DBInstances"
    ]
    assert db["Engine"] == "postgres" and db["Endpoint"]["Address"] == outputs["DatabaseEndpoint"]
    ec2 = client(moto_endpoint, "ec2")
    user_data = base64.b64decode(
        ec2.describe_instance_attribute(InstanceId=outputs["MasterInstanceId"], Attribute="userData")["UserData"][
            "Value"
        ]
    ).decode()
    assert f"host: {outputs['DatabaseEndpoint']}\n" in user_data
    assert "password" not in user_data and "password" not in repr(outputs)
    document = role_policy(moto_endpoint, physical[ids.MASTER_ROLE], "pedl-master")
    ec2_statement = next(s for s in document["Statement"] if s["Sid"] == "PedlMasterManagesAgents")
    assert ec2_statement["Action"] == SEED_EC2_ACTIONS + SEED_SPOT_ACTIONS
    (address,) = ec2.describe_addresses(PublicIps=[outputs["MasterPublicIp"]])["Addresses"]
    assert address["Domain"] == "vpc"  # (moto leaves the EIP's tags out and skips its association)


def test_an_existing_vpc_on_moto_and_what_deleting_keeps(moto_endpoint: str, network: MotoNetwork) -> None:
    """(Deleting a stack that made its VPC fails on moto, which leaves the route table behind.)"""
    subnet = client(moto_endpoint, "ec2").describe_subnets(SubnetIds=[network.subnet_id])["Subnets"][0]
    options = DeployOptions(
        cluster_id="mine",
        keypair=network.key_name,
        vpc_id=network.vpc_id,
        subnet_id=network.subnet_id,
        availability_zone=subnet["AvailabilityZone"],
    )
    outputs, physical, _ = deploy(moto_endpoint, options)
    assert ids.VPC not in physical and ids.SUBNET not in physical
    assert outputs["VpcId"] == network.vpc_id and outputs["SubnetId"] == network.subnet_id
    # (moto places a template's instance without reading its NetworkInterfaces: not checked here)
    volume = client(moto_endpoint, "ec2").describe_volumes(VolumeIds=[outputs["DataVolumeId"]])["Volumes"][0]
    assert volume["AvailabilityZone"] == subnet["AvailabilityZone"]
    client(moto_endpoint, "cloudformation").delete_stack(StackName=options.stack_name)
    assert not client(moto_endpoint, "iam").list_roles(PathPrefix="/")["Roles"]  # the rest is gone...
    client(moto_endpoint, "s3").head_bucket(Bucket=outputs["CheckpointBucket"])  # ...the bucket and
    assert client(moto_endpoint, "ec2").describe_volumes(VolumeIds=[outputs["DataVolumeId"]])["Volumes"]  # volume stay
