"""GET /info and GET /api/v1/master, both without a token as in Determined (its 0.38.1 SDK asks for the
master before it logs in). Both report `version` as the Determined release whose API pedl speaks (so
det, which warns on any other, stays quiet) and pedl's own as `pedlVersion`; nothing else that a
stranger could not already learn from /info."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from pedl.master.api.deps import Caller, caller, ctx_of
from pedl.master.identity import require_admin
from pedl.version import DETERMINED_API_VERSION, __version__

router = APIRouter()


@router.get("/info")
def info(request: Request) -> dict:
    ctx = ctx_of(request)
    return {
        "version": DETERMINED_API_VERSION,
        "pedlVersion": __version__,
        "cluster_id": ctx.cluster_id,
        "master_id": ctx.master_id,
        "cluster_name": ctx.config.cluster_name,
        "product": "pedl",
    }


@router.get("/api/v1/master")
def master_info(request: Request) -> dict:
    """Determined's GetMasterResponse, the same to every caller (no token is read): the pools and the
    database are for logged-in users (GET /api/v1/resource-pools) and admins (/api/v1/master/config)."""
    ctx = ctx_of(request)
    return {
        "version": DETERMINED_API_VERSION,
        "pedlVersion": __version__,
        "masterId": ctx.master_id,
        "clusterId": ctx.cluster_id,
        "clusterName": ctx.config.cluster_name,
        "hasCustomLogo": False,
        "strictJobQueueControl": False,
        "telemetryEnabled": False,
        "rbacEnabled": False,
        "userManagementEnabled": True,
        "product": "PRODUCT_UNSPECIFIED",
        "featureSwitches": [],
    }


@router.get("/api/v1/master/config")
def master_config(request: Request, who: Caller = Depends(caller)) -> dict:
    require_admin(who, "read the master's config")
    cfg = ctx_of(request).config.model_dump(mode="json")
    if cfg.get("db"):
        cfg["db"]["password"] = "********" if cfg["db"].get("password") else ""
    if cfg.get("agent_token"):
        cfg["agent_token"] = "********"
    # Determined's key for what schedules tasks: pedl's agents are its "agent" resource manager (det's
    # clients and its e2e suite read resource_manager.type to tell Kubernetes apart)
    cfg["resource_manager"] = {
        "type": "agent",
        "default_aux_resource_pool": cfg.get("default_aux_resource_pool"),
        "default_compute_resource_pool": cfg.get("default_compute_resource_pool"),
    }
    return {"config": cfg}
