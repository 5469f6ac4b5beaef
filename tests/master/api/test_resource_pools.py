"""Resource pools carry every key det 0.38.1's v1ResourcePool requires (det's `job list` reads them
first), with the provider's true values where the pool has one."""

from __future__ import annotations

from types import SimpleNamespace

from fastapi.testclient import TestClient

from pedl.config.master_config import MasterConfig
from pedl.master.api.resource_pools import with_determined_keys

# bindings.v1ResourcePool.from_json (determined 0.38.1): obj[key] for each
REQUIRED = {
    "agentDockerImage",
    "agentDockerNetwork",
    "agentDockerRuntime",
    "agentFluentImage",
    "auxContainerCapacity",
    "auxContainerCapacityPerAgent",
    "auxContainersRunning",
    "clusterName",
    "containerStartupScript",
    "defaultAuxPool",
    "defaultComputePool",
    "description",
    "details",
    "imageId",
    "instanceType",
    "location",
    "masterCertName",
    "masterUrl",
    "maxAgentStartingPeriod",
    "maxAgents",
    "maxIdleAgentPeriod",
    "minAgents",
    "name",
    "numAgents",
    "preemptible",
    "resourceManagerMetadata",
    "schedulerFittingPolicy",
    "schedulerType",
    "slotType",
    "slotsAvailable",
    "slotsUsed",
    "startupScript",
    "type",
}
POOL_TYPES = {
    "RESOURCE_POOL_TYPE_UNSPECIFIED",
    "RESOURCE_POOL_TYPE_AWS",
    "RESOURCE_POOL_TYPE_GCP",
    "RESOURCE_POOL_TYPE_STATIC",
    "RESOURCE_POOL_TYPE_K8S",
}
AWS_DETAIL = {
    "iamInstanceProfileArn",
    "imageId",
    "instanceName",
    "publicIp",
    "region",
    "rootVolumeSize",
    "securityGroupId",
    "spotEnabled",
    "sshKeyName",
    "tagKey",
    "tagValue",
}


def test_a_static_pool_has_every_key_det_requires(client: TestClient, user: dict) -> None:
    [pool] = client.get("/api/v1/resource-pools", headers=user).json()["resourcePools"]
    assert set(pool) >= REQUIRED, REQUIRED - set(pool)
    assert pool["type"] == "RESOURCE_POOL_TYPE_STATIC"
    assert pool["details"] == {"priorityScheduler": {"defaultPriority": 42, "preemption": False}}
    assert (pool["maxAgents"], pool["minAgents"], pool["instanceType"], pool["masterUrl"]) == (0, 0, "", "")
    assert isinstance(pool["maxIdleAgentPeriod"], float) and pool["resourceManagerMetadata"] == {}
    described = client.get("/api/v1/resource-pools/default", headers=user).json()["resourcePool"]
    assert set(described) >= REQUIRED


def test_a_provider_pool_shows_its_settings(tmp_path) -> None:
    config = MasterConfig(
        data_dir=tmp_path,
        cluster_name="lab",
        resource_pools=[
            {
                "pool_name": "gpu",
                "scheduler": {"type": "fair_share"},
                "provider": {
                    "type": "aws",
                    "image_id": "ami-1",
                    "ssh_key_name": "k",
                    "region": "us-west-2",
                    "instance_type": ["g4dn.xlarge", "p3.2xlarge"],
                    "master_address": "http://10.0.0.1:8080",
                    "max_instances": 4,
                    "min_instances": 1,
                    "spot": True,
                    "startup_script": "echo hi",
                    "network_interface": {"security_group_id": "sg-1", "subnet_id": "subnet-1"},
                },
            },
            {"pool_name": "local", "provider": {"type": "local", "max_instances": 2}},
        ],
        default_compute_resource_pool="gpu",
        default_aux_resource_pool="gpu",
    )
    ctx = SimpleNamespace(config=config)
    gpu = with_determined_keys(ctx, {"name": "gpu", "numAgents": 0})
    assert REQUIRED - {
        "defaultAuxPool",
        "defaultComputePool",
        "description",
        "preemptible",
        "schedulerFittingPolicy",
        "schedulerType",
        "slotType",
        "slotsAvailable",
        "slotsUsed",
    } <= set(gpu)
    assert (gpu["type"], gpu["instanceType"], gpu["imageId"], gpu["location"], gpu["masterUrl"]) == (
        "RESOURCE_POOL_TYPE_AWS",
        "g4dn.xlarge",
        "ami-1",
        "us-west-2",
        "http://10.0.0.1:8080",
    )
    assert (gpu["maxAgents"], gpu["minAgents"], gpu["startupScript"], gpu["clusterName"]) == (4, 1, "echo hi", "lab")
    aws = gpu["details"]["aws"]
    assert set(aws) >= AWS_DETAIL
    assert (aws["spotEnabled"], aws["securityGroupId"], aws["subnetId"], aws["instanceType"]) == (
        True,
        "sg-1",
        "subnet-1",
        "g4dn.xlarge",
    )
    assert "priorityScheduler" not in gpu["details"]  # a fair-share pool
    local = with_determined_keys(ctx, {"name": "local"})
    assert local["type"] in POOL_TYPES and (local["maxAgents"], local["instanceType"]) == (2, "local")
