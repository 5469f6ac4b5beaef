"""`pedl deploy aws down` against moto's CloudFormation: it terminates the cluster's agents (the
instances and spot requests with its tag pair, and only those), deletes the stack, keeps the bucket and
data volume unless --delete-data, refuses an unknown cluster, and asks before ending active experiments
(a fake master answers the experiments route). The stacks here use a given VPC: moto leaves a created
VPC's route table behind, so deleting a stack that made its VPC fails there (the last test shows how
that failure is reported)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cli.fake_master import FakeMaster, experiment, page
from tests.deploy.moto_cluster import (  # noqa: F401
    client,
    deploy_cli,
    instance_states,
    network_fixture,
    outputs_of,
    run_tagged_instances,
    stack_names,
)
from tests.support.moto_server import (  # noqa: F401
    MotoNetwork,
    moto_endpoint_fixture,
    moto_server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")


def up_in_network(endpoint: str, network: MotoNetwork, cluster_id: str = "demo") -> dict[str, str]:
    result = deploy_cli(
        endpoint,
        "up",
        "--cluster-id",
        cluster_id,
        "--keypair",
        network.key_name,
        "--vpc-id",
        network.vpc_id,
        "--subnet-id",
        network.subnet_id,
    )
    assert result.exit_code == 0, result.output
    return outputs_of(endpoint, f"pedl-{cluster_id}")


def down(endpoint: str, *args: str, input: str | None = None) -> Any:
    return deploy_cli(endpoint, "down", "--cluster-id", "demo", *args, input=input)


def test_down_terminates_only_the_cluster_s_agents_then_deletes_the_stack(
    moto_endpoint: str, network: MotoNetwork
) -> None:
    outputs = up_in_network(moto_endpoint, network)
    agents = run_tagged_instances(
        moto_endpoint,
        network.image_id,
        network.subnet_id,
        {"pedl-cluster": "demo", "pedl-resource-pool": "default"},
        count=2,
    )
    (other,) = run_tagged_instances(
        moto_endpoint, network.image_id, network.subnet_id, {"pedl-cluster": "other", "pedl-resource-pool": "default"}
    )
    (untagged,) = run_tagged_instances(moto_endpoint, network.image_id, network.subnet_id, {"Name": "mine"})
    ec2 = client(moto_endpoint, "ec2")
    spot = ec2.request_spot_instances(
        LaunchSpecification={"ImageId": network.image_id, "InstanceType": "g5.xlarge"},
        TagSpecifications=[
            {"ResourceType": "spot-instances-request", "Tags": [{"Key": "pedl-cluster", "Value": "demo"}]}
        ],
    )["SpotInstanceRequests"][0]
    (request,) = ec2.describe_spot_instance_requests(SpotInstanceRequestIds=[spot["SpotInstanceRequestId"]])[
        "SpotInstanceRequests"
    ]
    spot_instance = request["InstanceId"]  # moto fulfils it at once, with an instance lacking the tags

    result = down(moto_endpoint, "--yes")
    assert result.exit_code == 0, result.output
    assert "deleting cluster demo in us-east-1: 3 agent instance(s), 1 spot request(s)" in result.stdout
    states = instance_states(moto_endpoint, [*agents, spot_instance, other, untagged, outputs["MasterInstanceId"]])
    assert [states[i] for i in [*agents, spot_instance]] == ["terminated"] * 3
    assert states[other] == "running" and states[untagged] == "running"
    assert states[outputs["MasterInstanceId"]] == "terminated"  # stopped first, then the stack's deletion
    assert f"stopping the master {outputs['MasterInstanceId']}" in result.stdout
    remaining = ec2.describe_spot_instance_requests(Filters=[{"Name": "tag:pedl-cluster", "Values": ["demo"]}])[
        "SpotInstanceRequests"
    ]
    assert [r["State"] for r in remaining if r["State"] != "cancelled"] == []  # (moto forgets cancelled ones)
    assert "pedl-demo" not in stack_names(moto_endpoint)
    assert "cluster demo deleted" in result.stdout

    # kept: the bucket (with the wheel) and the data volume, and said so
    client(moto_endpoint, "s3").head_bucket(Bucket=outputs["CheckpointBucket"])
    (volume,) = ec2.describe_volumes(VolumeIds=[outputs["DataVolumeId"]])["Volumes"]
    assert volume["State"] == "available"
    assert f"the checkpoint bucket {outputs['CheckpointBucket']}" in result.stdout
    assert f"the master's data volume {outputs['DataVolumeId']}" in result.stdout


def test_delete_data_deletes_the_bucket_and_the_volume(moto_endpoint: str, network: MotoNetwork) -> None:
    outputs = up_in_network(moto_endpoint, network)
    s3 = client(moto_endpoint, "s3")
    s3.put_object(Bucket=outputs["CheckpointBucket"], Key="checkpoints/abc/state.pt", Body=b"weights")
    result = down(moto_endpoint, "--yes", "--delete-data")
    assert result.exit_code == 0, result.output
    assert outputs["CheckpointBucket"] not in [b["Name"] for b in s3.list_buckets()["Buckets"]]
    volumes = client(moto_endpoint, "ec2").describe_volumes(
        Filters=[{"Name": "volume-id", "Values": [outputs["DataVolumeId"]]}]
    )["Volumes"]
    assert volumes == []
    assert f"deleted the checkpoint bucket {outputs['CheckpointBucket']}" in result.stdout
    assert "kept" not in result.stdout


def test_down_of_an_unknown_cluster(moto_endpoint: str, network: MotoNetwork) -> None:
    result = deploy_cli(moto_endpoint, "down", "--cluster-id", "nope", "--yes")
    assert result.exit_code == 1
    assert "--cluster-id: no cluster 'nope' in us-east-1: there is no stack pedl-nope" in result.stderr


def test_down_with_active_experiments_asks(moto_endpoint: str, network: MotoNetwork, master: FakeMaster) -> None:
    up_in_network(moto_endpoint, network)
    master.route("GET", "/api/v1/experiments", page("experiments", [experiment(7, name="mnist")]))
    result = down(moto_endpoint, "--master-url", master.url, input="n\n")
    assert result.exit_code == 1
    assert "1 experiment(s) are active" in result.stderr and "7 (mnist)" in result.stderr
    assert "Delete the cluster and end them?" in result.stdout
    assert "aborted: nothing was deleted" in result.stderr
    assert "pedl-demo" in stack_names(moto_endpoint)
    (asked,) = master.calls("GET", "/api/v1/experiments")
    assert asked.query["states"] == ["STATE_ACTIVE"]

    result = down(moto_endpoint, "--master-url", master.url, input="y\n")
    assert result.exit_code == 0, result.output
    assert "pedl-demo" not in stack_names(moto_endpoint)


def test_yes_skips_the_question(moto_endpoint: str, network: MotoNetwork, master: FakeMaster) -> None:
    up_in_network(moto_endpoint, network)
    master.route("GET", "/api/v1/experiments", page("experiments", [experiment(7)]))
    result = down(moto_endpoint, "--master-url", master.url, "--yes")
    assert result.exit_code == 0, result.output
    assert "Delete the cluster" not in result.stdout and master.calls("GET", "/api/v1/experiments") == []
    assert "pedl-demo" not in stack_names(moto_endpoint)


def test_no_active_experiments_no_question(moto_endpoint: str, network: MotoNetwork, master: FakeMaster) -> None:
    up_in_network(moto_endpoint, network)
    master.route("GET", "/api/v1/experiments", page("experiments", []))
    result = down(moto_endpoint, "--master-url", master.url)
    assert result.exit_code == 0, result.output
    assert "no active experiments" in result.stderr and "Delete the cluster" not in result.stdout


def test_an_unreachable_master_is_said_and_asked_anyway(moto_endpoint: str, network: MotoNetwork) -> None:
    up_in_network(moto_endpoint, network)
    result = down(moto_endpoint, "--master-url", "http://127.0.0.1:9", input="n\n")
    assert result.exit_code == 1
    assert "cannot ask the master at http://127.0.0.1:9 whether experiments are active" in result.stderr
    assert "Delete the cluster anyway?" in result.stdout
    assert "pedl-demo" in stack_names(moto_endpoint)


@pytest.mark.filterwarnings("ignore:Exception\\(DependencyViolationError\\):UserWarning")
def test_a_failed_deletion_is_reported(moto_endpoint: str, network: MotoNetwork) -> None:
    """A stack that made its own VPC: moto keeps the route table and refuses to delete the VPC."""
    assert deploy_cli(moto_endpoint, "up", "--cluster-id", "demo", "--keypair", network.key_name).exit_code == 0
    result = down(moto_endpoint, "--yes")
    assert result.exit_code == 1
    assert "deleting the stack pedl-demo failed: DependencyViolation" in result.stderr
