"""The FastAPI app factory. Its lifespan migrates the database, creates the default users, reloads
cluster state and runs the control loop (event-driven, with a periodic tick as a safety net)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator

from fastapi import APIRouter, FastAPI
from sqlalchemy.exc import OperationalError
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from pedl.clock import Clock, SystemClock
from pedl.config.master_config import MasterConfig
from pedl.errors import Unavailable
from pedl.master import data_dir
from pedl.master.agent_token import resolve_agent_token
from pedl.master.api import (
    agents,
    auth,
    body_limit,
    checkpoint_gc_reports,
    checkpoints,
    conditional,
    errors,
    experiments,
    instances,
    jobs,
    master,
    master_logs,
    metric_export,
    metric_series,
    metrics_streams,
    model_registry,
    ntsc,
    openapi,
    package,
    project_experiments,
    projects,
    prometheus,
    proxy,
    proxy_websocket,
    resource_allocation,
    resource_pools,
    task_activity,
    tasks,
    templates,
    trial_source_infos,
    trials,
    users,
    webui,
    workspaces,
)
from pedl.master.api.proxy_relays import ProxyRelays
from pedl.master.checkpoints import service as checkpoints_service
from pedl.master.context import MasterContext
from pedl.master.db import migrate
from pedl.master.db.engine import Database
from pedl.master.identity import passwords
from pedl.master.identity import users as users_service
from pedl.master.observability.master_logs import MasterLogRing
from pedl.master.observability.request_latency import RequestLatency
from pedl.master.startup_summary import database_summary, pool_summary, task_users_summary
from pedl.master.tasks.activity import ActivityThrottle
from pedl.master.wiring import attach_checkpoint_gc, attach_experiment_deletion, build_context
from pedl.master.worker_passes import run_pass, stop_workers
from pedl.master.workers import idle_tasks, metric_digests, metric_retention
from pedl.master.workspaces import workspaces as workspaces_service
from pedl.version import __version__

log = logging.getLogger("pedl.master")

TICK_SECONDS = 1.0
PROVISIONER_TICK_SECONDS = 5.0  # the safety net; events wake provisioners at once
PROVISIONER_MIN_SPACING = 0.05
STOP_GRACE_SECONDS = 10.0  # for the workers' passes in progress at a stop


def open_database(config: MasterConfig) -> Database:
    data_dir.make(config.data_dir)
    db = Database(config.database_url())
    try:
        migrate.upgrade(db.engine)
    except OperationalError as exc:
        where = f"{config.db.host}:{config.db.port}/{config.db.name}" if config.db else str(config.data_dir)
        raise Unavailable(f"cannot open the database at {where}: {exc.orig}") from None
    return db


def _default_users(ctx: MasterContext) -> None:
    with ctx.db.session() as s:
        created = users_service.ensure_default_users(s, ctx.clock.now())
        workspaces_service.ensure_defaults(s, ctx.clock.now())  # owned by admin, now that it exists
        if created:
            log.warning("created user(s) %s with BLANK passwords", ", ".join(created))
        blank = users_service.users_with_blank_password(s)
    if blank:
        log.warning("users %s have blank passwords: set them with `pedl user change-password USER`", ", ".join(blank))


async def control_loop(ctx: MasterContext, stop: asyncio.Event) -> None:
    wake = asyncio.Event()
    loop = asyncio.get_running_loop()
    ctx.controller.set_waker(lambda: loop.call_soon_threadsafe(wake.set))
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=TICK_SECONDS)
        wake.clear()
        try:
            await run_pass(ctx.controller.tick)
        except Exception:  # keep the loop alive; the next pass retries
            log.exception("control loop pass failed")
            await asyncio.sleep(TICK_SECONDS)


async def provisioner_loop(ctx: MasterContext, prov, wake: asyncio.Event, stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    last_end = 0.0
    while not stop.is_set():
        # at most one pass per PROVISIONER_MIN_SPACING, without a fixed sleep after every wake
        await asyncio.sleep(max(0.0, last_end + PROVISIONER_MIN_SPACING - loop.time()))
        wake.clear()
        try:
            next_at = await run_pass(prov.step)
        except Exception:  # a provider bug must not stop the master
            log.exception("provisioner pass for pool %s failed", prov.pool.pool_name)
            next_at = None
        timeout = PROVISIONER_TICK_SECONDS
        if next_at is not None:
            timeout = min(max(next_at - ctx.clock.now(), PROVISIONER_MIN_SPACING), PROVISIONER_TICK_SECONDS)
        last_end = loop.time()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=timeout)


def start_provisioners(ctx: MasterContext, stop: asyncio.Event) -> list[asyncio.Task]:
    from pedl.master.provisioner.provisioner import PoolProvisioner
    from pedl.master.wiring import make_provider

    loop = asyncio.get_running_loop()
    events: list[asyncio.Event] = []
    tasks = []
    for pool in ctx.config.resource_pools:
        if pool.provider is None:
            continue
        prov = PoolProvisioner(ctx.controller, pool, make_provider(pool, ctx))
        ctx.provisioners[pool.pool_name] = prov
        wake = asyncio.Event()
        events.append(wake)
        tasks.append(asyncio.create_task(provisioner_loop(ctx, prov, wake, stop), name=f"provisioner {pool.pool_name}"))
    ctx.controller.set_provisioner_waker(lambda: [loop.call_soon_threadsafe(e.set) for e in events])
    return tasks


def _add_routes(app: FastAPI, router: APIRouter) -> None:
    """The router's routes, added to the app as they were built when their module was imported.
    include_router() would wrap them for this app and build every route's dependency graph again on the app's
    first requests (FastAPI builds an included router's routes lazily, per app): ~40 ms of CPU per app, once
    per master, but once per test for the ~2,200 tests that make an app. pedl's routers take no include-time
    options (prefix, dependencies, tags are the router's own, already in its routes) and no dependency overrides."""
    app.router.routes.extend(router.routes)


def create_app(config: MasterConfig, *, clock: Clock | None = None, db: Database | None = None) -> FastAPI:
    hashing = config.security.password_hashing
    passwords.configure(hashing.time_cost, hashing.memory_kib, hashing.parallelism)
    ctx = build_context(
        config,
        db or open_database(config),
        clock or SystemClock(),
        master_id=str(uuid.uuid4()),
        agent_token=resolve_agent_token(config),
    )
    checkpoint_gc = attach_checkpoint_gc(ctx)
    deleter = attach_experiment_deletion(ctx)

    master_log = MasterLogRing()  # the process's log records from start to stop (GET /api/v1/master/logs)

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        master_log.attach()
        await asyncio.to_thread(_default_users, ctx)
        await asyncio.to_thread(ctx.controller.startup)
        stop = asyncio.Event()
        workers = [asyncio.create_task(control_loop(ctx, stop), name="control loop"), *start_provisioners(ctx, stop)]
        await asyncio.to_thread(checkpoints_service.report_outside_roots, ctx)
        workers += [
            asyncio.create_task(checkpoint_gc.run_loop(stop), name="checkpoint GC"),
            asyncio.create_task(deleter.run_loop(stop), name="experiment deletion"),
            asyncio.create_task(metric_digests.run_loop(ctx.db, ctx.digest_queue, stop), name="metric digests"),
            # deletes only where configured
            asyncio.create_task(metric_retention.run_loop(ctx, stop), name="metric retention"),
            # services unused for their idle_timeout
            asyncio.create_task(idle_tasks.run_loop(ctx, stop), name="idle tasks"),
        ]
        log.info(
            "pedl master %s up (cluster %s, database %s)", __version__, ctx.cluster_id, database_summary(ctx.config)
        )
        for pool in ctx.config.resource_pools:
            log.info("resource pool %s", pool_summary(pool))
        who, apart = task_users_summary(ctx.config)
        log.log(logging.INFO if apart else logging.WARNING, "users with no agent user group run their tasks %s", who)
        try:
            yield
        finally:
            stop.set()
            # the passes in progress end before the database is disposed of (worker_passes.py)
            await stop_workers(workers, STOP_GRACE_SECONDS)
            for prov in ctx.provisioners.values():
                prov.provider.close()
            ctx.db.dispose()
            master_log.detach()

    app = FastAPI(
        title="pedl master",
        version=__version__,
        lifespan=lifespan,
        description="pedl's REST API, in Determined's /api/v1 dialect.",
    )
    app.state.ctx = ctx
    app.state.master_logs = master_log
    app.state.checkpoint_gc = checkpoint_gc
    app.state.experiment_deletion = deleter  # DELETE /api/v1/experiments/{id} wakes it
    app.state.proxy_relays = ProxyRelays(ctx, config.proxy)  # /proxy/{task_id}/: its relays and their bounds
    app.state.task_activity = ActivityThrottle()  # the proxy's writes of a task's last use, at most one per 10 s
    errors.install(app)
    conditional.install(app)
    app.add_middleware(body_limit.BodyLimit, limits=config.limits, proxy_body_bytes=config.proxy.max_request_body_bytes)
    app.add_middleware(RequestLatency, metrics=ctx.metrics)  # outermost of the two: a 413 is timed too
    if config.security.trusted_proxies:  # outermost: every part of the app sees the client the proxy names
        app.add_middleware(ProxyHeadersMiddleware, trusted_hosts=list(config.security.trusted_proxies))
    for module in (
        master,
        auth,
        users,
        agents,
        experiments,
        metrics_streams,
        trials,
        metric_series,
        tasks,
        checkpoints,
        resource_pools,
        instances,
        package,
        prometheus,
        jobs,
        master_logs,
        model_registry,
        workspaces,
        projects,
        project_experiments,
        templates,
        trial_source_infos,
        metric_export,
        resource_allocation,
        proxy,
        proxy_websocket,
        ntsc,
        task_activity,
        checkpoint_gc_reports,
    ):
        _add_routes(app, module.router)
    _add_routes(app, tasks.legacy_router)
    _add_routes(app, checkpoints.legacy_router)
    openapi.install(app)  # after the routers: it corrects the document they produce
    app.router.default = webui.WebUI(not_found=app.router.default)  # a GET no route takes: the WebUI

    return app
