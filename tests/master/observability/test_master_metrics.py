"""The counters and histograms the master updates where things happen: the scheduling and provisioning
passes timed with the injected timer, launches and launch failures by kind, metric reports by group,
and one registry per master so several masters in one process never collide."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import select

from pedl.clock import ManualClock
from pedl.config.master_config import MasterConfig, ResourcePoolConfig
from pedl.config.provider_config import AWSProviderConfig
from pedl.master.app import create_app
from pedl.master.db import models
from pedl.master.db.engine import Database
from pedl.master.experiments import service as experiments_service
from pedl.master.identity import users as users_service
from pedl.master.observability.master_metrics import MasterMetrics
from pedl.master.provisioner.providers.base import CloudErrorKind
from pedl.master.provisioner.provisioner import PoolProvisioner
from pedl.master.wiring import build_context
from tests.master.fakes import SINGLE_CONFIG, StartedTask, bearer, create_experiment, login, post
from tests.support.memory_provider import MemoryProvider

CONFIG = """
name: p
entrypoint: python3 train.py
searcher: {name: single, metric: loss, max_length: 10}
resources: {slots_per_trial: 1}
"""
NOW = 1_000_000.0


class StepTimer:
    """A timer that moves by `step` seconds each time it is read: each timed block lasts `step`."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 100.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def value(metrics: MasterMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_a_timed_block_is_observed_even_when_it_raises() -> None:
    m = MasterMetrics(timer=StepTimer(0.25), process_metrics=False)
    with m.timed(m.scheduling_pass):
        pass
    with pytest.raises(RuntimeError), m.timed(m.scheduling_pass):
        raise RuntimeError("a failed pass still took its time")
    assert value(m, "pedl_scheduling_pass_seconds_count") == 2
    assert value(m, "pedl_scheduling_pass_seconds_sum") == pytest.approx(0.5)
    assert value(m, "pedl_scheduling_pass_seconds_bucket", le="0.25") == 2
    assert value(m, "pedl_scheduling_pass_seconds_bucket", le="0.1") == 0


def test_the_scheduling_pass_is_timed_with_the_injected_timer(master_config: MasterConfig, database: Database) -> None:
    metrics = MasterMetrics(timer=StepTimer(0.04), process_metrics=False)
    ctx = build_context(master_config, database, ManualClock(NOW), cluster_id="c1", metrics=metrics)
    assert ctx.metrics is metrics and ctx.controller.metrics is metrics
    ctx.controller.tick()
    ctx.controller.tick()
    assert value(metrics, "pedl_scheduling_pass_seconds_count") == 2
    assert value(metrics, "pedl_scheduling_pass_seconds_sum") == pytest.approx(0.08)
    assert value(metrics, "pedl_scheduling_pass_seconds_bucket", le="0.025") == 0
    assert value(metrics, "pedl_scheduling_pass_seconds_bucket", le="0.05") == 2


@pytest.fixture
def provisioned(master_config: MasterConfig, database: Database):
    aws = AWSProviderConfig(
        type="aws",
        image_id="ami-1",
        ssh_key_name="k",
        master_url="http://m:8080",
        instance_type="g4dn.xlarge",
        spot=True,
        launch_error_backoff=5,
        launch_error_backoff_max=20,
    )
    pool = ResourcePoolConfig(pool_name="gpu", provider=aws)
    config = master_config.model_copy(
        update={"resource_pools": [pool], "default_compute_resource_pool": "gpu", "default_aux_resource_pool": "gpu"}
    )
    metrics = MasterMetrics(timer=StepTimer(0.5), process_metrics=False)
    clock = ManualClock(NOW)
    ctx = build_context(config, database, clock, cluster_id="c1", metrics=metrics)
    provider = MemoryProvider(clock)
    prov = ctx.provisioners["gpu"] = PoolProvisioner(ctx.controller, pool, provider)
    with database.session() as s:
        users_service.ensure_default_users(s, clock.now())

    def submit(s) -> None:
        owner = s.scalar(select(models.User).where(models.User.username == "determined"))
        experiments_service.create(ctx.controller, s, owner, config_text=CONFIG, files=[], activate=True)

    return ctx, prov, provider, lambda: ctx.controller.run(submit)


def test_launches_and_launch_failures_by_kind(provisioned) -> None:
    ctx, prov, provider, submit = provisioned
    m = ctx.metrics
    submit()
    provider.fail_next_launch(CloudErrorKind.CAPACITY, code="InsufficientInstanceCapacity")
    prov.step()  # spot is out of capacity: counted, and the next pass falls back to on-demand
    assert value(m, "pedl_instance_launch_failures_total", pool="gpu", kind="capacity") == 1
    assert value(m, "pedl_instance_launches_total", pool="gpu", instance_type="g4dn.xlarge", market="spot") is None
    prov.step()
    assert value(m, "pedl_instance_launches_total", pool="gpu", instance_type="g4dn.xlarge", market="on-demand") == 1
    submit()
    provider.fail_next_launch(CloudErrorKind.QUOTA, times=2, code="InstanceLimitExceeded")
    prov.step()
    assert value(m, "pedl_instance_launch_failures_total", pool="gpu", kind="quota") == 1
    assert value(m, "pedl_instance_launch_failures_total", pool="gpu", kind="capacity") == 1
    assert value(m, "pedl_provisioner_backoff", pool="gpu") == 1  # the gauge reads the same provisioner
    assert value(m, "pedl_provisioner_pass_seconds_count", pool="gpu") == 3
    assert value(m, "pedl_provisioner_pass_seconds_sum", pool="gpu") == pytest.approx(1.5)


def test_metric_reports_are_counted_by_group_once_stored(client: TestClient, user: dict, admin: dict, agent) -> None:
    create_experiment(client, user, SINGLE_CONFIG)
    # a user who may not edit the experiment (its owner and admins may report, as in Determined)
    r = post(client, "/api/v1/users", {"user": {"username": "mallory", "admin": False, "active": True}}, admin)
    assert r.status_code == 200, r.text
    mallory = bearer(login(client, "mallory"))
    [task] = agent.start_all()
    m = client.app.state.ctx.metrics

    def report(t: StartedTask, group: str, steps: int, headers: dict | None = None) -> int:
        body = {
            "group": group,
            "metrics": {
                "trialId": t.trial_id,
                "trialRunId": 1,
                "stepsCompleted": steps,
                "metrics": {"avgMetrics": {"loss": 1.0 / steps}},
            },
        }
        return post(client, f"/api/v1/trials/{t.trial_id}/metrics", body, headers or bearer(t.token)).status_code

    assert report(task, "training", 1) == 200
    assert report(task, "training", 2) == 200
    assert report(task, "validation", 2) == 200
    assert report(task, "inference", 2) == 200  # a group of the trial's own: one bounded label for all such
    assert report(task, "training", 3, mallory) == 403  # refused: not ingested, not counted
    assert value(m, "pedl_metric_reports_total", group="training") == 2
    assert value(m, "pedl_metric_reports_total", group="validation") == 1
    assert value(m, "pedl_metric_reports_total", group="other") == 1
    assert value(m, "pedl_metric_reports_total", group="inference") is None


def test_each_master_has_a_registry_of_its_own(master_config: MasterConfig, tmp_path) -> None:
    security = master_config.security.model_copy(update={"metrics_access": "public"})
    first = create_app(master_config.model_copy(update={"security": security}))
    second = create_app(master_config.model_copy(update={"security": security, "data_dir": tmp_path / "second"}))
    assert first.state.ctx.metrics.registry is not second.state.ctx.metrics.registry
    with TestClient(first) as a, TestClient(second) as b:
        for _ in range(3):
            a.get("/info")
        b.get("/info")
        login(b, "admin")
        scraped = {}
        for name, c in (("first", a), ("second", b)):
            families = {f.name: f for f in text_string_to_metric_families(c.get("/metrics").text)}
            scraped[name] = {
                s.labels["route"]: s.value
                for s in families["pedl_api_request_duration_seconds"].samples
                if s.name.endswith("_count")
            }
            assert "process_cpu_seconds" in families  # the process metrics are kept
    assert scraped["first"]["/info"] == 3 and scraped["second"]["/info"] == 1
    assert "/api/v1/auth/login" not in scraped["first"]
