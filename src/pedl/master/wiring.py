"""Building the master's shared parts, in one place: the app factory and tests call this, so a
MasterContext is never assembled by hand or half-wired."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from typing import Any

from pedl.clock import Clock
from pedl.common.checkpoint_storage import CheckpointStorage, storage_from_config
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import CallerCache
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.context import MasterContext
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.observability.master_metrics import MasterMetrics
from pedl.master.observability.pool_state import PoolStateCollector
from pedl.master.services.checkpoint_gc import CheckpointGC
from pedl.master.services.experiment_deletion import ExperimentDeleter
from pedl.master.services.login_limiter import LoginLimiter


def cluster_id_of(db: Database, now: float) -> str:
    """The cluster's id, made on the first start and kept in the database."""
    with db.session() as s:
        row = s.get(models.ClusterInfo, 1)
        if row is None:
            row = models.ClusterInfo(id=1, cluster_id=str(uuid.uuid4()), created_at=now)
            s.add(row)
        return row.cluster_id


def build_context(config: MasterConfig, db: Database, clock: Clock, *, cluster_id: str | None = None,
                  master_id: str = "", agent_token: str = "", metrics: MasterMetrics | None = None) -> MasterContext:
    """Every shared part, wired: the controller gets the same hub, clock, caller cache and metrics as the
    rest. `cluster_id` None reads (or makes) the database's. `metrics` None makes a registry of this
    master's own, whose pool gauges read this context at scrape time."""
    metrics = metrics or MasterMetrics()
    hub = AgentHub()
    caller_cache = CallerCache()
    if cluster_id is None:
        cluster_id = cluster_id_of(db, clock.now())
    controller = Controller(config=config, db=db, clock=clock, hub=hub, caller_cache=caller_cache,
                            cluster_id=cluster_id, metrics=metrics)
    ctx = MasterContext(config=config, db=db, clock=clock, hub=hub, controller=controller,
                        login_limiter=LoginLimiter(config.security.login_rate_limit), caller_cache=caller_cache,
                        cluster_id=cluster_id, master_id=master_id, agent_token=agent_token, metrics=metrics)
    metrics.registry.register(PoolStateCollector(ctx))
    return ctx


def attach_checkpoint_gc(ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage]
                         = storage_from_config) -> CheckpointGC:
    """A checkpoint GC worker for the context; the controller's GC requests go to it from now on."""
    gc = CheckpointGC(ctx, storage_for=storage_for)
    ctx.controller.set_checkpoint_gc(gc.request)
    return gc


def attach_experiment_deletion(ctx: MasterContext, storage_for: Callable[[Mapping[str, Any]], CheckpointStorage]
                               = storage_from_config) -> ExperimentDeleter:
    """The worker that deletes the experiments DELETE /api/v1/experiments/{id} marks DELETING."""
    return ExperimentDeleter(ctx, storage_for=storage_for)
