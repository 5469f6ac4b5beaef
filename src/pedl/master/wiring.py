"""Building the master's shared parts, in one place: the app factory and tests call this, so a
MasterContext is never assembled by hand or half-wired."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pedl.clock import Clock
from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.identity.login_limiter import LoginLimiter
from pedl.master.observability.master_metrics import MasterMetrics
from pedl.master.observability.pool_state import PoolStateCollector
from pedl.master.provisioner.providers.base import Provider
from pedl.master.workers.checkpoint_gc import CheckpointGC
from pedl.master.workers.experiment_deletion import ExperimentDeleter


def cluster_id_of(db: Database, now: float) -> str:
    """The cluster's id, made on the first start and kept in the database."""
    with db.session() as s:
        row = s.get(models.ClusterInfo, 1)
        if row is None:
            row = models.ClusterInfo(id=1, cluster_id=str(uuid.uuid4()), created_at=now)
            s.add(row)
        return row.cluster_id


def build_context(
    config: MasterConfig,
    db: Database,
    clock: Clock,
    *,
    cluster_id: str | None = None,
    master_id: str = "",
    agent_token: str = "",
    metrics: MasterMetrics | None = None,
) -> MasterContext:
    """Every shared part, wired: the controller gets the same hub, clock, caller cache and metrics as the
    rest. `cluster_id` None reads (or makes) the database's. `metrics` None makes a registry of this
    master's own, whose pool gauges read this context at scrape time."""
    metrics = metrics or MasterMetrics()
    hub = AgentHub()
    caller_cache = CallerCache()
    if cluster_id is None:
        cluster_id = cluster_id_of(db, clock.now())
    controller = Controller(
        config=config, db=db, clock=clock, hub=hub, caller_cache=caller_cache, cluster_id=cluster_id, metrics=metrics
    )
    ctx = MasterContext(
        config=config,
        db=db,
        clock=clock,
        hub=hub,
        controller=controller,
        login_limiter=LoginLimiter(config.security.login_rate_limit),
        caller_cache=caller_cache,
        cluster_id=cluster_id,
        master_id=master_id,
        agent_token=agent_token,
        metrics=metrics,
    )
    metrics.registry.register(PoolStateCollector(ctx))
    return ctx


def attach_checkpoint_gc(
    ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config
) -> CheckpointGC:
    """A checkpoint GC worker for the context; the controller's GC requests go to it from now on."""
    gc = CheckpointGC(ctx, storage_for=storage_for)
    ctx.controller.set_checkpoint_gc(gc.request)
    return gc


def attach_experiment_deletion(
    ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage] = storage_from_config
) -> ExperimentDeleter:
    """The worker that deletes the experiments DELETE /api/v1/experiments/{id} marks DELETING."""
    return ExperimentDeleter(ctx, storage_for=storage_for)


def make_provider(pool: ResourcePoolConfig, ctx: MasterContext) -> Provider:
    """The provider a pool's config names, built with what it needs of the master (its address, TLS, secrets)."""
    cfg = pool.provider
    if cfg is None:
        raise ValueError(f"pool {pool.pool_name} has no provider")
    tls = ctx.config.security.tls
    scheme = "https" if tls.enabled else "http"
    if cfg.type == "local":
        from pedl.master.provisioner.providers.local import LocalProvider

        master_url = cfg.master_url or f"{scheme}://127.0.0.1:{ctx.config.port}"
        # the certificate chain the master serves holds the CA that agents verify it against
        return LocalProvider(
            cfg,
            pool=pool.pool_name,
            cluster_id=ctx.cluster_id,
            data_dir=ctx.config.data_dir,
            master_url=master_url,
            agent_token=ctx.agent_token,
            clock=ctx.clock,
            master_cert=tls.cert if tls.enabled else None,
        )
    if cfg.type == "aws":
        from pedl.master.agents.credentials import InstanceSecrets
        from pedl.master.provisioner.master_address import resolve_master_url
        from pedl.master.provisioner.providers.aws import AWSProvider

        master_url = resolve_master_url(cfg.master_url or f"{scheme}://ec2.local-ipv4:{ctx.config.port}")
        # user data is readable on the instance: each one gets a single-use secret, never the agent token
        return AWSProvider(
            cfg,
            pool=pool.pool_name,
            cluster_id=ctx.cluster_id,
            master_url=master_url,
            instance_secrets=InstanceSecrets(ctx, pool.pool_name),
            clock=ctx.clock,
            master_ca=tls.cert.read_text() if tls.enabled and tls.cert else None,
        )
    raise ValueError(f"unknown provider type {cfg.type!r}")
