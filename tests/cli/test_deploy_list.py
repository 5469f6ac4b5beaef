"""`pedl deploy aws list` and `describe` against moto's CloudFormation: the stacks pedl made (named
pedl-ID and tagged pedl-cluster=ID, no others), a cluster's outputs, status and agent instances."""

from __future__ import annotations

import json

import pytest
import yaml

from tests.deploy.moto_cluster import (  # noqa: F401
    client,
    deploy_cli,
    network_fixture,
    outputs_of,
    run_tagged_instances,
)
from tests.support.moto_server import (  # noqa: F401
    MotoNetwork,
    moto_endpoint_fixture,
    moto_server_fixture,
)

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse:UserWarning")
TOPIC = yaml.safe_dump({"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}}})


def test_list_shows_the_clusters_pedl_made(moto_endpoint: str, network: MotoNetwork) -> None:
    for cluster_id in ("alpha", "beta"):
        result = deploy_cli(moto_endpoint, "up", "--cluster-id", cluster_id, "--keypair", network.key_name)
        assert result.exit_code == 0, result.output
    cfn = client(moto_endpoint, "cloudformation")
    cfn.create_stack(StackName="pedl-gamma", TemplateBody=TOPIC)  # the name, not the tag
    cfn.create_stack(StackName="other", TemplateBody=TOPIC, Tags=[{"Key": "pedl-cluster", "Value": "other"}])
    result = deploy_cli(moto_endpoint, "list", "--json")
    assert result.exit_code == 0, result.output
    clusters = json.loads(result.stdout)
    assert [c["cluster_id"] for c in clusters] == ["alpha", "beta"]
    assert clusters[0]["status"] == "CREATE_COMPLETE" and clusters[0]["created"]
    assert clusters[0]["master_url"] == outputs_of(moto_endpoint, "pedl-alpha")["MasterUrl"]
    table = deploy_cli(moto_endpoint, "list")
    assert table.exit_code == 0 and "alpha" in table.stdout and "gamma" not in table.stdout
    assert outputs_of(moto_endpoint, "pedl-beta")["MasterUrl"] in table.stdout


def test_describe_shows_outputs_status_and_agents(moto_endpoint: str, network: MotoNetwork) -> None:
    assert deploy_cli(moto_endpoint, "up", "--cluster-id", "demo", "--keypair", network.key_name).exit_code == 0
    outputs = outputs_of(moto_endpoint, "pedl-demo")
    agents = run_tagged_instances(
        moto_endpoint,
        network.image_id,
        network.subnet_id,
        {"pedl-cluster": "demo", "pedl-resource-pool": "default"},
        count=2,
    )
    run_tagged_instances(moto_endpoint, network.image_id, network.subnet_id, {"pedl-cluster": "other"})
    client(moto_endpoint, "ec2").stop_instances(InstanceIds=agents[1:])
    result = deploy_cli(moto_endpoint, "describe", "--cluster-id", "demo", "--json")
    assert result.exit_code == 0, result.output
    cluster = json.loads(result.stdout)
    assert cluster["status"] == "CREATE_COMPLETE" and cluster["master_url"] == outputs["MasterUrl"]
    assert cluster["outputs"] == dict(sorted(outputs.items()))
    rows = {a["instance_id"]: a for a in cluster["agents"]}  # the master and the other cluster's: not agents
    assert set(rows) == set(agents)
    assert rows[agents[0]]["state"] == "running" and rows[agents[1]]["state"] == "stopped"
    assert rows[agents[0]]["pool"] == "default" and rows[agents[0]]["type"] == "g5.xlarge"
    table = deploy_cli(moto_endpoint, "describe", "--cluster-id", "demo")
    assert table.exit_code == 0, table.output
    assert outputs["MasterUrl"] in table.stdout and agents[0] in table.stdout
    assert "agent instances (2)" in table.stdout


def test_describe_of_an_unknown_cluster(moto_endpoint: str, network: MotoNetwork) -> None:
    result = deploy_cli(moto_endpoint, "describe", "--cluster-id", "nope")
    assert result.exit_code == 1 and "no cluster 'nope'" in result.stderr
