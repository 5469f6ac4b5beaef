"""A stack's events reported once each, oldest first, and the outcome of waiting for an operation:
on moto's CloudFormation, with the failed resource events moto never makes added to its stack."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pedl.deploy.aws_session import AwsSession
from pedl.deploy.options import DeployOptions
from pedl.deploy.stack_events import EventFeed, format_event, wait_for_stack
from pedl.deploy.template import build_template, template_yaml
from pedl.deploy.waiting import Progress
from tests.deploy.moto_cluster import add_stack_event, client, network_fixture, set_stack_status  # noqa: F401
from tests.support.moto_server import REGION, MotoNetwork, moto_endpoint_fixture, moto_server_fixture  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


def create(endpoint: str, network: MotoNetwork) -> str:
    options = DeployOptions(cluster_id="demo", keypair=network.key_name)
    return client(endpoint, "cloudformation").create_stack(
        StackName="pedl-demo", TemplateBody=template_yaml(build_template(options)), Capabilities=["CAPABILITY_IAM"]
    )["StackId"]


def test_each_event_is_returned_once_oldest_first(moto_endpoint: str, network: MotoNetwork) -> None:
    stack_id = create(moto_endpoint, network)
    aws = AwsSession(REGION, moto_endpoint)
    feed = EventFeed(aws, stack_id)
    assert [e["ResourceStatus"] for e in feed.poll()] == ["CREATE_IN_PROGRESS", "CREATE_COMPLETE"]
    assert feed.poll() == []
    later = EventFeed.from_now(aws, stack_id)  # as an update starts: only what comes after
    add_stack_event("pedl-demo", "MasterInstance", "AWS::EC2::Instance", "UPDATE_IN_PROGRESS", None)
    assert [e["LogicalResourceId"] for e in later.poll()] == ["MasterInstance"]
    assert [e["LogicalResourceId"] for e in feed.poll()] == ["MasterInstance"]


def test_a_failed_operation_gives_each_failed_resource_s_reason(moto_endpoint: str, network: MotoNetwork) -> None:
    stack_id = create(moto_endpoint, network)
    aws = AwsSession(REGION, moto_endpoint)
    feed = EventFeed.from_now(aws, stack_id)
    add_stack_event(
        "pedl-demo",
        "DataVolumeAttachment",
        "AWS::EC2::VolumeAttachment",
        "UPDATE_FAILED",
        "vol-1 is already attached to an instance (Service: Ec2, Status Code: 400, VolumeInUse)",
    )
    add_stack_event("pedl-demo", "MasterInstance", "AWS::EC2::Instance", "UPDATE_COMPLETE", None)
    set_stack_status("pedl-demo", "UPDATE_ROLLBACK_COMPLETE")
    lines: list[str] = []
    outcome = wait_for_stack(
        aws, stack_id, operation="UPDATE", what="the update", feed=feed, progress=Progress(event=lines.append)
    )
    assert not outcome.ok and outcome.status == "UPDATE_ROLLBACK_COMPLETE"
    assert outcome.failures == [
        "DataVolumeAttachment (AWS::EC2::VolumeAttachment) UPDATE_FAILED: vol-1 is already "
        "attached to an instance (Service: Ec2, Status Code: 400, VolumeInUse)"
    ]
    assert [line.split()[1] for line in lines] == ["DataVolumeAttachment", "MasterInstance"]


def test_a_completed_operation_is_ok(moto_endpoint: str, network: MotoNetwork) -> None:
    stack_id = create(moto_endpoint, network)
    aws = AwsSession(REGION, moto_endpoint)
    outcome = wait_for_stack(
        aws, stack_id, operation="CREATE", what="the stack", feed=EventFeed(aws, stack_id), progress=Progress()
    )
    assert outcome.ok and outcome.status == "CREATE_COMPLETE" and outcome.failures == []


def test_format_event() -> None:
    when = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    line = format_event(
        {
            "Timestamp": when,
            "LogicalResourceId": "CheckpointBucket",
            "ResourceStatus": "CREATE_FAILED",
            "ResourceStatusReason": "Access Denied",
        }
    )
    assert line.split(None, 1)[1] == "CheckpointBucket             CREATE_FAILED        Access Denied"
    assert line.split()[0] == when.astimezone().strftime("%H:%M:%S")
    bare = format_event({"Timestamp": when, "LogicalResourceId": "X", "ResourceStatus": "CREATE_COMPLETE"})
    assert bare.endswith("CREATE_COMPLETE")
