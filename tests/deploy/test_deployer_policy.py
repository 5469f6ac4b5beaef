"""The deployer's policy (`iam-policy --deployer`): every resource type of every template has what
CloudFormation needs to make it, and every AWS call `up`, an update, `list`, `describe` and
`down --delete-data` really make (recorded from boto3 on moto) is allowed; IAM accepts the document."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.deploy.aws_session import AwsSession
from pedl.deploy.cluster_info import describe_cluster, list_clusters
from pedl.deploy.deployer_policy import RESOURCE_ACTIONS, actions_of_operation, deployer_policy
from pedl.deploy.options import DeployOptions
from pedl.deploy.stack_down import apply_down, plan_down
from pedl.deploy.stack_up import apply_up, plan_up
from pedl.deploy.template import build_template
from pedl.deploy.waiting import Progress
from tests.deploy.moto_cluster import client, network_fixture, run_tagged_instances  # noqa: F401
from tests.deploy.template_samples import combinations, options_for
from tests.support.moto_server import REGION, MotoNetwork, moto_endpoint_fixture, moto_server_fixture  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


def allowed() -> set[str]:
    return {a for s in deployer_policy()["Statement"] for a in s["Action"]}


def test_every_resource_type_of_every_template_is_covered() -> None:
    types = {r["Type"] for combo in combinations() for r in build_template(options_for(*combo))["Resources"].values()}
    assert types <= RESOURCE_ACTIONS.keys(), types - RESOURCE_ACTIONS.keys()
    assert {a for actions in RESOURCE_ACTIONS.values() for a in actions} <= allowed()


def test_every_call_of_up_update_list_describe_and_down_is_allowed(moto_endpoint: str, network: MotoNetwork) -> None:
    calls: set[tuple[str, str]] = set()

    def record(model: Any, **_: Any) -> None:
        calls.add((model.service_model.signing_name, model.name))

    session = boto3.session.Session()
    session.events.register("before-call", record)
    aws = AwsSession(REGION, moto_endpoint, session)
    options = DeployOptions(
        cluster_id="demo", keypair=network.key_name, vpc_id=network.vpc_id, subnet_id=network.subnet_id
    )
    apply_up(aws, plan_up(aws, options, Progress()), Progress())
    apply_up(aws, plan_up(aws, dataclasses.replace(options, inbound_cidr="10.0.0.0/8"), Progress()), Progress())
    run_tagged_instances(moto_endpoint, network.image_id, network.subnet_id, {"pedl-cluster": "demo"})
    list_clusters(aws)
    describe_cluster(aws, "demo")
    apply_down(aws, plan_down(aws, "demo"), delete_data=True, progress=Progress())
    needed = {a for service, operation in calls for a in actions_of_operation(service, operation)}
    assert {
        "cloudformation:CreateStack",
        "cloudformation:UpdateStack",
        "s3:PutObject",
        "ec2:TerminateInstances",
        "s3:DeleteBucket",
        "ec2:DeleteVolume",
    } <= needed  # the recording saw the whole run
    assert needed <= allowed(), needed - allowed()


def test_iam_accepts_the_document_and_the_cli_prints_it(moto_endpoint: str) -> None:
    result = CliRunner().invoke(app, ["deploy", "aws", "iam-policy", "--deployer"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == deployer_policy()
    client(moto_endpoint, "iam").create_policy(PolicyName="pedl-deployer", PolicyDocument=result.stdout)
    assert len(json.dumps(deployer_policy(), separators=(",", ":"))) < 6144  # a managed policy's limit
    refused = CliRunner().invoke(app, ["deploy", "aws", "iam-policy", "--deployer", "--spot"])
    assert refused.exit_code == 2 and "--deployer" in refused.stderr
