"""Resource pools: capacity, queue, live instances, provisioning status and recent events, with every
key Determined's v1ResourcePool requires (det's `job list` reads the pools first)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Request

from pedl.config.provider_config import AWSProviderConfig
from pedl.master.agents import resource_pools as pools_service
from pedl.master.api.deps import Caller, caller, ctx_of
from pedl.master.wire.base import Pagination

if TYPE_CHECKING:
    from pedl.config.master_config import ResourcePoolConfig
    from pedl.master.context import MasterContext

router = APIRouter(prefix="/api/v1")


@router.get("/resource-pools")
def list_pools(request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    pools = [with_determined_keys(ctx, p) for p in pools_service.summaries(ctx)]
    return {"resourcePools": pools, "pagination": Pagination.of(0, len(pools), len(pools), len(pools)).model_dump()}


@router.get("/resource-pools/{name}")
def describe_pool(name: str, request: Request, _: Caller = Depends(caller)) -> dict:
    ctx = ctx_of(request)
    return {"resourcePool": with_determined_keys(ctx, pools_service.describe_pool(ctx, name))}


def with_determined_keys(ctx: MasterContext, summary: dict[str, Any]) -> dict[str, Any]:
    """The summary plus v1ResourcePool's required keys: the provider's values where the pool has one
    (instance type, image, region, min/max agents, master URL, startup script), empty ones for what
    pedl has no notion of (Docker images and runtimes of Determined's agents, aux container
    capacity, a master certificate name)."""
    pool = ctx.config.pool(summary["name"])
    cfg = pool.provider if pool is not None else None
    aws_cfg = cfg if isinstance(cfg, AWSProviderConfig) else None
    types = cfg.instance_types() if cfg is not None else []
    out = {
        # Determined's pool types: a provider of local instances is pedl's own, of no type det knows
        "type": "RESOURCE_POOL_TYPE_STATIC"
        if cfg is None
        else "RESOURCE_POOL_TYPE_AWS"
        if aws_cfg
        else "RESOURCE_POOL_TYPE_UNSPECIFIED",
        "agentDockerImage": "",
        "agentDockerNetwork": cfg.agent_docker_network if cfg is not None else "",
        "agentDockerRuntime": "",
        "agentFluentImage": "",
        "auxContainerCapacity": 0,
        "auxContainerCapacityPerAgent": 0,
        "auxContainersRunning": 0,
        "clusterName": ctx.config.cluster_name,
        "containerStartupScript": "",
        "imageId": aws_cfg.image_id if aws_cfg else "",
        "instanceType": types[0] if types else "",
        "location": (aws_cfg.region or "") if aws_cfg else "",
        "masterCertName": "",
        "masterUrl": (cfg.master_url or "") if cfg is not None else "",
        "maxAgents": cfg.max_instances if cfg is not None else 0,
        "minAgents": cfg.min_instances if cfg is not None else 0,
        "maxAgentStartingPeriod": cfg.max_agent_starting_period if cfg is not None else 0.0,
        "maxIdleAgentPeriod": cfg.max_idle_agent_period if cfg is not None else 0.0,
        "resourceManagerMetadata": {},
        "startupScript": cfg.startup_script if cfg is not None else "",
        "details": _details(pool),
    }
    return {**summary, **out}


def _details(pool: ResourcePoolConfig | None) -> dict[str, Any]:
    """v1ResourcePoolDetail: the AWS provider's settings, and the priority scheduler's."""
    if pool is None:
        return {}
    out: dict[str, Any] = {}
    if pool.scheduler.type == "priority":
        out["priorityScheduler"] = {
            "defaultPriority": pool.scheduler.default_priority,
            "preemption": pool.scheduler.preemption,
        }
    cfg = pool.provider
    if cfg is not None and cfg.type == "aws":
        net = cfg.network_interface
        out["aws"] = {
            "region": cfg.region or "",
            "rootVolumeSize": cfg.root_volume_size,
            "imageId": cfg.image_id,
            "tagKey": cfg.tag_key,
            "tagValue": cfg.tag_value,
            "instanceName": cfg.instance_name,
            "sshKeyName": cfg.ssh_key_name,
            "publicIp": net.public_ip,
            "subnetId": net.subnet_id or "",
            "securityGroupId": net.security_group_id or cfg.security_group or "",
            "iamInstanceProfileArn": cfg.iam_instance_profile_arn or "",
            "instanceType": cfg.instance_types()[0],
            "spotEnabled": cfg.spot,
            "spotMaxPrice": cfg.spot_max_price or "",
        }
    return out
