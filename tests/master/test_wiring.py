"""Building the master's shared parts: build_context wires every field and gives the controller the
context's own hub, clock, caller cache and config; the cluster id lives in the database; the
checkpoint GC worker receives the controller's requests once attached."""

from __future__ import annotations

import uuid

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig
from pedl.master.caller_cache import Caller, CallerCache
from pedl.master.cluster.agent_hub import AgentHub
from pedl.master.cluster.controller import Controller
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.identity.login_limiter import LoginLimiter
from pedl.master.lifecycle import experiment_actions
from pedl.master.lifecycle.states import ExperimentState
from pedl.master.wiring import attach_checkpoint_gc, build_context
from tests.master.lifecycle.recording_effects import experiment, owner


def test_every_field_of_the_context_is_set(master_config: MasterConfig, database: Database) -> None:
    clock = ManualClock(5_000.0)
    ctx = build_context(master_config, database, clock, cluster_id="c-1", master_id="m-1", agent_token="tok")
    assert ctx.config is master_config and ctx.db is database and ctx.clock is clock
    assert isinstance(ctx.hub, AgentHub) and isinstance(ctx.controller, Controller)
    assert isinstance(ctx.caller_cache, CallerCache)
    assert isinstance(ctx.login_limiter, LoginLimiter)
    assert ctx.login_limiter.config is master_config.security.login_rate_limit
    assert (ctx.cluster_id, ctx.master_id, ctx.agent_token) == ("c-1", "m-1", "tok")
    assert ctx.provisioners == {}  # filled as the master starts the pools' provisioners


def test_the_controller_shares_the_contexts_parts(master_config: MasterConfig, database: Database) -> None:
    clock = ManualClock(5_000.0)
    ctx = build_context(master_config, database, clock, cluster_id="c-1")
    ctl = ctx.controller
    assert ctl.hub is ctx.hub and ctl.clock is clock and ctl.caller_cache is ctx.caller_cache
    assert ctl.config is master_config and ctl.db is database and ctl.cluster_id == "c-1"
    clock.advance(7)
    assert ctl.now == 5_007.0
    # an allocation's end drops its task token from the cache the API reads
    with database.session() as s:
        user = owner(s)
        ctx.caller_cache.put("task-token", Caller(user=user, allocation_id="1.1.1"), clock.now())
        ctx.caller_cache.put("login-token", Caller(user=user), clock.now())
    ctl.allocation_closed("1.1.1")
    assert ctx.caller_cache.get("task-token", clock.now()) is None
    assert ctx.caller_cache.get("login-token", clock.now()) is not None


def test_a_missing_cluster_id_is_made_once_and_kept_in_the_database(
    master_config: MasterConfig, database: Database
) -> None:
    clock = ManualClock(5_000.0)
    first = build_context(master_config, database, clock)
    uuid.UUID(first.cluster_id)  # a fresh uuid
    assert first.controller.cluster_id == first.cluster_id
    clock.advance(60)
    second = build_context(master_config, database, clock)
    assert second.cluster_id == first.cluster_id
    with database.session() as s:
        row = s.get(models.ClusterInfo, 1)
        assert (row.cluster_id, row.created_at) == (first.cluster_id, 5_000.0)
    assert build_context(master_config, database, clock, cluster_id="given").cluster_id == "given"


def test_attached_checkpoint_gc_receives_the_controllers_requests(
    master_config: MasterConfig, database: Database
) -> None:
    clock = ManualClock(5_000.0)
    ctx = build_context(master_config, database, clock, cluster_id="c-1")
    ctx.controller.want_checkpoint_gc(3)  # before a worker is attached: dropped, no error
    gc = attach_checkpoint_gc(ctx)
    assert gc.pending() == {}
    ctx.controller.want_checkpoint_gc(4)
    assert gc.pending() == {4: 5_000.0}

    # and through an operation the controller runs: a killed experiment asks for its GC
    def kill(s) -> int:
        exp = experiment(ctx.controller, s)
        experiment_actions.kill(ctx.controller, s, exp)
        assert exp.state == ExperimentState.CANCELED
        return exp.id

    exp_id = ctx.controller.run(kill)
    assert gc.pending() == {4: 5_000.0, exp_id: 5_000.0}
