"""The CloudFormation template: cfn-lint finds no error in option combinations where every three
options meet in every way, the security groups hold the seeds' rules, the IAM roles exactly the
seeds' actions, data is kept on delete, the database password appears nowhere, and every taggable
resource carries the cluster's tag pair."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
import yaml
from cfnlint.api import ManualArgs, lint
from cfnlint.schema import PROVIDER_SCHEMA_MANAGER

from pedl.deploy import logical_ids as ids
from pedl.deploy.master_user_data import placeholders_in
from pedl.deploy.options import DeployOptions
from pedl.deploy.template import AGENT_AMI_PARAMETER, MASTER_AMI_PARAMETER, build_template, template_yaml
from tests.deploy.template_samples import (
    AMI,
    SUBNET,
    VPC,
    actions_of,
    combination_id,
    combinations,
    covering_combinations,
    options_for,
    resources_of_type,
    role_statements,
    security_group_rules,
)

# the seeds' IAM policy (000/001: four actions; 002: the spot calls), written out here on purpose
SEED_EC2_ACTIONS = ["ec2:DescribeInstances", "ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances"]
SEED_SPOT_ACTIONS = ["ec2:CancelSpotInstanceRequests", "ec2:RequestSpotInstances", "ec2:DescribeSpotInstanceRequests"]
REGIONS = ["us-east-1", "eu-west-1"]


def lint_errors(template: dict[str, Any]) -> list[str]:
    matches = lint(template_yaml(template), config=ManualArgs(regions=REGIONS))
    return [f"{m.rule.id} {m.message} ({'/'.join(map(str, m.path))})" for m in matches if m.rule.severity == "error"]


@pytest.mark.parametrize("combo", covering_combinations(), ids=combination_id)
def test_cfn_lint_finds_no_error(combo: tuple[Any, ...]) -> None:
    """Every three options meet in every way in one of these (the template's other tests build all 64)."""
    assert lint_errors(build_template(options_for(*combo))) == []


@pytest.mark.parametrize("combo", covering_combinations(2), ids=combination_id)
def test_the_template_up_deploys_passes_too(combo: tuple[Any, ...]) -> None:
    """As `up` builds it: the master's AMI pinned to an image id, the wheel's sha256 in the user data."""
    template = build_template(options_for(*combo), master_image_id=AMI, wheel_sha256="0" * 64)
    assert template["Parameters"][ids.MASTER_IMAGE_PARAM]["Type"] == "AWS::EC2::Image::Id"
    assert lint_errors(template) == []


def test_the_linted_combinations_cover_every_three_options_in_every_way() -> None:
    picked = covering_combinations()
    for which in itertools.combinations(range(6), 3):
        seen = {tuple(c[i] for i in which) for c in picked}
        assert seen == {tuple(c[i] for i in which) for c in combinations()}, which
    assert len(picked) == 12 and len(set(picked)) == 12  # of 64: the optimum for six two-valued axes


def test_cfn_lint_does_find_errors() -> None:
    """The check above can fail: a broken template is reported."""
    template = build_template(options_for(False, "rds", False, False, False, False))
    template["Resources"][ids.MASTER]["Properties"]["InstanceType"] = "t3.enormous"
    template["Resources"][ids.DATA_VOLUME_ATTACHMENT]["Properties"]["InstanceId"] = {"Ref": "NoSuchInstance"}
    errors = lint_errors(template)
    assert any("t3.enormous" in e for e in errors) and any("NoSuchInstance" in e for e in errors)


def expected_rules(o: DeployOptions) -> set[tuple[str, str, str, int | None, int | None, str]]:
    m, a, d, port, cidr = ids.MASTER_SG, ids.AGENT_SG, ids.DB_SG, o.port, f"cidr:{o.inbound_cidr}"
    seeds = {
        (m, "in", "tcp", port, port, f"sg:{a}"),  # the master port from the agents...
        (m, "in", "tcp", port, port, cidr),  # ...and from anyone needing access
        (m, "out", "tcp", 0, 65535, f"sg:{a}"),  # master to agents, all TCP
        (a, "in", "tcp", 0, 65535, f"sg:{m}"),  # agents from the master, all TCP
        (a, "in", "tcp", 0, 65535, f"sg:{a}"),  # agents to each other (distributed training)
        (a, "out", "tcp", 0, 65535, "cidr:0.0.0.0/0"),  # agent egress
    }
    # what the master needs beyond the seeds (template_network.py says why): SSH, HTTPS, HTTP
    added = {
        (m, "in", "tcp", 22, 22, cidr),
        (m, "out", "tcp", 443, 443, "cidr:0.0.0.0/0"),
        (m, "out", "tcp", 80, 80, "cidr:0.0.0.0/0"),
    }
    if o.db == "rds":
        added |= {
            (m, "out", "tcp", 5432, 5432, f"sg:{d}"),
            (d, "in", "tcp", 5432, 5432, f"sg:{m}"),
            (d, "out", "-1", None, None, "cidr:127.0.0.1/32"),
        }
    return seeds | added


@pytest.mark.parametrize("tls", [False, True])
@pytest.mark.parametrize("db", ["embedded", "rds"])
@pytest.mark.parametrize("vpc", [False, True])
def test_security_groups_hold_the_seeds_rules(tls: bool, db: str, vpc: bool) -> None:
    o = options_for(False, db, vpc, tls, False, False)
    template = build_template(o)
    assert security_group_rules(template) == expected_rules(o)
    groups = resources_of_type(template, "AWS::EC2::SecurityGroup")
    assert set(groups) == ({ids.MASTER_SG, ids.AGENT_SG} | ({ids.DB_SG} if db == "rds" else set()))
    for group in groups.values():
        assert group["Properties"]["VpcId"] == (VPC if vpc else {"Ref": ids.VPC})


def test_the_master_port_follows_tls() -> None:
    rules = security_group_rules(build_template(options_for(False, "embedded", False, True, False, False)))
    assert (ids.MASTER_SG, "in", "tcp", 8443, 8443, "cidr:203.0.113.0/24") in rules
    assert not any(r[3] == 8080 for r in rules)


@pytest.mark.parametrize("spot", [False, True])
def test_master_role_has_exactly_the_seeds_ec2_actions(spot: bool) -> None:
    statements = role_statements(build_template(options_for(spot, "rds", False, False, False, False)), ids.MASTER_ROLE)
    ec2 = [s for s in statements if any(a.startswith("ec2:") for a in actions_of(s))]
    assert len(ec2) == 1 and ec2[0]["Resource"] == "*" and ec2[0]["Effect"] == "Allow"
    assert actions_of(ec2[0]) == SEED_EC2_ACTIONS + (SEED_SPOT_ACTIONS if spot else [])


def test_master_role_passes_the_agent_role_only() -> None:
    statements = role_statements(
        build_template(options_for(True, "embedded", False, False, False, False)), ids.MASTER_ROLE
    )
    (pass_role,) = [s for s in statements if any(a.startswith("iam:") for a in actions_of(s))]
    assert actions_of(pass_role) == ["iam:PassRole"]
    assert pass_role["Resource"] == {"Fn::GetAtt": [ids.AGENT_ROLE, "Arn"]}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}


def _on_the_bucket(resource: Any) -> bool:
    return resource == {"Fn::GetAtt": [ids.BUCKET, "Arn"]} or resource == {
        "Fn::Sub": "arn:${AWS::Partition}:s3:::${CheckpointBucket}/*"
    }


@pytest.mark.parametrize("db", ["embedded", "rds"])
def test_the_rest_of_the_master_role_is_the_bucket_and_the_database_secret(db: str) -> None:
    statements = role_statements(build_template(options_for(False, db, False, False, False, False)), ids.MASTER_ROLE)
    rest = [s for s in statements if not any(a.startswith(("ec2:", "iam:")) for a in actions_of(s))]
    s3 = [s for s in rest if all(a.startswith("s3:") for a in actions_of(s))]
    assert s3 and all(_on_the_bucket(s["Resource"]) for s in s3)
    secrets = [s for s in rest if s not in s3]
    if db == "rds":
        assert secrets == [
            {
                "Sid": "PedlMasterReadsDatabaseSecret",
                "Effect": "Allow",
                "Action": "secretsmanager:GetSecretValue",
                "Resource": {"Ref": ids.DB_SECRET},
            }
        ]
    else:
        assert secrets == []


def test_agent_role_reaches_the_bucket_and_nothing_else() -> None:
    template = build_template(options_for(True, "rds", False, True, True, False))
    statements = role_statements(template, ids.AGENT_ROLE)
    assert statements
    for statement in statements:
        assert statement["Effect"] == "Allow" and "NotAction" not in statement and "NotResource" not in statement
        assert all(a.startswith("s3:") and "*" not in a for a in actions_of(statement))
        assert _on_the_bucket(statement["Resource"])
    actions = {a for s in statements for a in actions_of(s)}
    assert {"s3:GetObject", "s3:PutObject", "s3:ListBucket"} <= actions
    profile = template["Resources"][ids.AGENT_PROFILE]["Properties"]
    assert profile["Roles"] == [{"Ref": ids.AGENT_ROLE}]
    assert resources_of_type(template, "AWS::IAM::Policy") == {}
    assert resources_of_type(template, "AWS::IAM::ManagedPolicy") == {}
    assert "ManagedPolicyArns" not in template["Resources"][ids.AGENT_ROLE]["Properties"]


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _user_data(template: dict[str, Any]) -> str:
    text, variables = template["Resources"][ids.MASTER]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
    return text + json.dumps(variables)


@pytest.mark.parametrize("combo", [c for c in combinations() if c[1] == "rds"][::3], ids=combination_id)
def test_the_database_password_is_in_no_user_data_and_no_output(combo: tuple[Any, ...]) -> None:
    template = build_template(options_for(*combo))
    secret = template["Resources"][ids.DB_SECRET]["Properties"]
    assert "SecretString" not in secret and secret["GenerateSecretString"]["GenerateStringKey"] == "password"
    db = template["Resources"][ids.DATABASE]["Properties"]
    assert db["MasterUserPassword"] == {"Fn::Sub": "{{resolve:secretsmanager:${DatabaseSecret}:SecretString:password}}"}
    # the dynamic references are in the database's properties and nowhere else
    elsewhere = {k: v for k, v in template["Resources"].items() if k != ids.DATABASE}
    assert not [s for s in _strings(elsewhere) + _strings(template["Outputs"]) if "resolve:" in s]
    user_data = _user_data(template)
    assert "password" not in user_data.lower()
    assert "SecretString" not in user_data and "SecretString" not in json.dumps(template["Outputs"])
    # the secret is named in outputs by its ARN only
    assert [k for k, v in template["Outputs"].items() if ids.DB_SECRET in json.dumps(v)] == ["DatabaseSecretArn"]
    assert template["Outputs"]["DatabaseSecretArn"]["Value"] == {"Ref": ids.DB_SECRET}


@pytest.mark.parametrize("db", ["embedded", "rds"])
def test_data_is_kept_when_the_stack_goes(db: str) -> None:
    resources = build_template(options_for(False, db, False, False, False, False))["Resources"]
    for name, policy in [(ids.BUCKET, "Retain"), (ids.DATA_VOLUME, "Retain")] + (
        [(ids.DATABASE, "Snapshot"), (ids.DB_SECRET, "Retain")] if db == "rds" else []
    ):
        assert resources[name]["DeletionPolicy"] == policy, name
        assert resources[name]["UpdateReplacePolicy"] == policy, name
    volume = resources[ids.DATA_VOLUME]["Properties"]
    assert volume["Size"] >= 100 and volume["Encrypted"] is True
    attachment = resources[ids.DATA_VOLUME_ATTACHMENT]["Properties"]
    assert attachment["VolumeId"] == {"Ref": ids.DATA_VOLUME} and attachment["InstanceId"] == {"Ref": ids.MASTER}
    # the instance's own disks go with it; the data volume is not one of them
    (root,) = resources[ids.MASTER]["Properties"]["BlockDeviceMappings"]
    assert root["Ebs"]["DeleteOnTermination"] is True and "VolumeId" not in json.dumps(root)
    assert "Volumes" not in resources[ids.MASTER]["Properties"]


def _taggable(kind: str) -> bool:
    schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema("us-east-1", kind).schema
    return "Tags" in schema.get("properties", {})


@pytest.mark.parametrize("combo", combinations()[::5], ids=combination_id)
def test_every_taggable_resource_carries_the_tag_pair(combo: tuple[Any, ...]) -> None:
    template = build_template(options_for(*combo))
    taggable = {name for name, r in template["Resources"].items() if _taggable(r["Type"])}
    assert {ids.MASTER, ids.BUCKET, ids.DATA_VOLUME, ids.MASTER_ROLE, ids.AGENT_ROLE} <= taggable
    for name in taggable:
        tags = template["Resources"][name]["Properties"].get("Tags", [])
        assert {"Key": "pedl-cluster", "Value": "demo"} in tags, name


def test_the_network_is_made_unless_given() -> None:
    made = build_template(options_for(False, "rds", False, False, False, False))
    for kind in (
        "AWS::EC2::VPC",
        "AWS::EC2::InternetGateway",
        "AWS::EC2::VPCGatewayAttachment",
        "AWS::EC2::Route",
        "AWS::EC2::SubnetRouteTableAssociation",
    ):
        assert len(resources_of_type(made, kind)) == 1, kind
    assert len(resources_of_type(made, "AWS::EC2::Subnet")) == 3  # public, and two database subnets
    route = resources_of_type(made, "AWS::EC2::Route")[ids.DEFAULT_ROUTE]["Properties"]
    assert route["DestinationCidrBlock"] == "0.0.0.0/0" and route["GatewayId"] == {"Ref": ids.GATEWAY}
    given = build_template(options_for(False, "rds", True, False, False, False))
    for kind in ("AWS::EC2::VPC", "AWS::EC2::Subnet", "AWS::EC2::InternetGateway", "AWS::EC2::Route"):
        assert resources_of_type(given, kind) == {}, kind
    (nic,) = given["Resources"][ids.MASTER]["Properties"]["NetworkInterfaces"]
    assert nic["SubnetId"] == SUBNET
    assert given["Resources"][ids.DB_SUBNET_GROUP]["Properties"]["SubnetIds"] == list(
        options_for(False, "rds", True, False, False, False).db_subnet_ids
    )
    # the data volume must be in the given subnet's zone: a parameter, with a default when it is known
    assert given["Parameters"][ids.AZ_PARAM]["Type"] == "AWS::EC2::AvailabilityZone::Name"
    assert "Default" not in given["Parameters"][ids.AZ_PARAM]
    known = build_template(options_for(False, "embedded", True, False, False, False, availability_zone="us-east-1c"))
    assert known["Resources"][ids.DATA_VOLUME]["Properties"]["AvailabilityZone"] == "us-east-1c"


def test_amis_come_from_ssm_unless_the_agent_ami_is_given() -> None:
    default = build_template(options_for(False, "embedded", False, False, False, False))["Parameters"]
    assert default[ids.MASTER_IMAGE_PARAM] == {
        **default[ids.MASTER_IMAGE_PARAM],
        "Type": "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>",
        "Default": MASTER_AMI_PARAMETER,
    }
    assert default[ids.AGENT_IMAGE_PARAM]["Type"] == "AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>"
    assert default[ids.AGENT_IMAGE_PARAM]["Default"] == AGENT_AMI_PARAMETER
    assert "deeplearning" in AGENT_AMI_PARAMETER and "gpu" in AGENT_AMI_PARAMETER
    given = build_template(options_for(False, "embedded", False, False, False, True))["Parameters"]
    assert given[ids.AGENT_IMAGE_PARAM]["Type"] == "AWS::EC2::Image::Id"
    assert given[ids.AGENT_IMAGE_PARAM]["Default"] == AMI


@pytest.mark.parametrize("combo", combinations()[::7], ids=combination_id)
def test_user_data_refers_only_to_names_of_the_stack(combo: tuple[Any, ...]) -> None:
    template = build_template(options_for(*combo))
    text, variables = template["Resources"][ids.MASTER]["Properties"]["UserData"]["Fn::Base64"]["Fn::Sub"]
    known = set(template["Parameters"]) | set(template["Resources"]) | set(variables) | {"AWS::Region"}
    used = placeholders_in(text)
    assert {name.split(".", 1)[0] for name in used} <= known
    assert {ids.DATA_VOLUME, ids.BUCKET, ids.AGENT_IMAGE_PARAM} <= {n.split(".", 1)[0] for n in used}


@pytest.mark.parametrize(
    ("tls", "elastic_ip", "url"),
    [
        (False, False, ["http://", {"Fn::GetAtt": [ids.MASTER, "PublicIp"]}, ":8080"]),
        (True, True, ["https://", {"Ref": ids.ELASTIC_IP}, ":8443"]),
    ],
)
def test_outputs(tls: bool, elastic_ip: bool, url: list[Any]) -> None:
    template = build_template(options_for(False, "embedded", False, tls, elastic_ip, False))
    outputs = template["Outputs"]
    assert outputs["MasterUrl"]["Value"] == {"Fn::Join": ["", url]}
    for key in (
        "MasterInstanceId",
        "CheckpointBucket",
        "DataVolumeId",
        "MasterSecurityGroupId",
        "AgentSecurityGroupId",
        "AgentInstanceProfileArn",
        "VpcId",
        "SubnetId",
        "PedlVersion",
    ):
        assert key in outputs, key
    assert (outputs["TagKey"]["Value"], outputs["TagValue"]["Value"]) == ("pedl-cluster", "demo")
    assert ("CaCertificateUrl" in outputs) == tls
    eips = resources_of_type(template, "AWS::EC2::EIP")
    assert len(eips) == (1 if elastic_ip else 0)
    assert len(resources_of_type(template, "AWS::EC2::EIPAssociation")) == len(eips)


def test_the_yaml_is_the_template_without_aliases() -> None:
    template = build_template(options_for(True, "rds", False, True, True, False))
    text = template_yaml(template)
    assert yaml.safe_load(text) == template
    assert "&id" not in text and "*id" not in text
    assert "  Fn::Sub:\n" in text or "Fn::Sub:" in text


def test_the_template_fits_in_a_create_stack_call() -> None:
    """CreateStack takes a TemplateBody of up to 51,200 bytes; no bucket is needed to deploy."""
    largest = max(len(template_yaml(build_template(options_for(*c))).encode()) for c in combinations())
    assert largest < 51_200
