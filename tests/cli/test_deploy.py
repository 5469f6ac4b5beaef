"""`pedl deploy aws iam-policy`: the seeds' minimal master policy, with spot and PassRole when asked."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from pedl.cli.main import app

MASTER_ACTIONS = ["ec2:DescribeInstances", "ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances"]
SPOT_ACTIONS = ["ec2:CancelSpotInstanceRequests", "ec2:RequestSpotInstances", "ec2:DescribeSpotInstanceRequests"]


def run(*args: str):  # click's Result
    return CliRunner().invoke(app, ["deploy", "aws", "iam-policy", *args])


def test_the_four_ec2_actions_by_default() -> None:
    result = run()
    assert result.exit_code == 0, result.output
    policy = json.loads(result.stdout)
    assert policy["Version"] == "2012-10-17"
    (statement,) = policy["Statement"]
    assert statement["Effect"] == "Allow" and statement["Resource"] == "*"
    assert statement["Action"] == MASTER_ACTIONS


def test_spot_adds_the_three_spot_actions() -> None:
    result = run("--spot")
    assert result.exit_code == 0, result.output
    (statement,) = json.loads(result.stdout)["Statement"]
    assert statement["Action"] == MASTER_ACTIONS + SPOT_ACTIONS


def test_agent_role_adds_pass_role_on_it() -> None:
    arn = "arn:aws:iam::123456789012:role/pedl/agent-role"
    result = run("--agent-role-arn", arn)
    assert result.exit_code == 0, result.output
    ec2, pass_role = json.loads(result.stdout)["Statement"]
    assert ec2["Action"] == MASTER_ACTIONS
    assert pass_role == {
        "Sid": "PedlMasterPassesAgentRole",
        "Effect": "Allow",
        "Action": "iam:PassRole",
        "Resource": arn,
    }


def test_an_instance_profile_arn_becomes_the_role_of_that_name() -> None:
    result = run("--spot", "--agent-role-arn", "arn:aws:iam::123456789012:instance-profile/agent")
    assert result.exit_code == 0, result.output
    ec2, pass_role = json.loads(result.stdout)["Statement"]
    assert ec2["Action"] == MASTER_ACTIONS + SPOT_ACTIONS
    assert pass_role["Resource"] == "arn:aws:iam::123456789012:role/agent"
    assert "instance profile" in result.stderr


def test_other_partitions_are_accepted() -> None:
    result = run("--agent-role-arn", "arn:aws-us-gov:iam::123456789012:role/agent")
    assert result.exit_code == 0, result.output


def test_a_bad_arn_is_a_clear_error() -> None:
    for bad in (
        "agent-role",
        "arn:aws:s3:::bucket",
        "arn:aws:iam::1234:role/agent",
        "arn:aws:iam::123456789012:user/x",
    ):
        result = run("--agent-role-arn", bad)
        assert result.exit_code == 1
        assert result.stdout == ""
        assert "--agent-role-arn" in result.stderr and bad in result.stderr


def test_the_policy_is_exactly_what_the_aws_provider_may_call() -> None:
    from pedl.master.provisioner.providers.aws_iam import ALLOWED_OPERATIONS

    (statement,) = json.loads(run("--spot").stdout)["Statement"]
    assert {a.removeprefix("ec2:") for a in statement["Action"]} == ALLOWED_OPERATIONS
