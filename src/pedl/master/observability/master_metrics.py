"""One Prometheus registry per master, with the counters and histograms the master updates as
things happen: pass durations, launches and their failures, metric reports, request latency."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

PASS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
METRIC_GROUPS = ("training", "validation")  # any other group a trial reports is counted as "other"


def market(spot: bool) -> str:
    return "spot" if spot else "on-demand"


class MasterMetrics:
    """The master's registry (its own, so several masters in one process never collide) and the
    metrics updated in place. `timer` measures durations only and never decides anything: the
    clock that decisions take is the injected Clock, not this."""

    def __init__(self, *, timer: Callable[[], float] = time.perf_counter, process_metrics: bool = True) -> None:
        self.timer = timer
        self.registry = CollectorRegistry(auto_describe=True)
        if process_metrics:
            ProcessCollector(registry=self.registry)
            PlatformCollector(registry=self.registry)
            GCCollector(registry=self.registry)
        r = self.registry
        self.scheduling_pass = Histogram(
            "pedl_scheduling_pass_seconds",
            "Duration of one scheduling pass of the controller (Controller.tick).",
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.provisioner_pass = Histogram(
            "pedl_provisioner_pass_seconds",
            "Duration of one provisioning pass of a pool.",
            ["pool"],
            buckets=PASS_BUCKETS,
            registry=r,
        )
        self.launches = Counter(
            "pedl_instance_launches",
            "Instances launched by the provisioners.",
            ["pool", "instance_type", "market"],
            registry=r,
        )
        self.launch_failures = Counter(
            "pedl_instance_launch_failures",
            "Launch calls the provider refused, by cloud error kind.",
            ["pool", "kind"],
            registry=r,
        )
        self.metric_reports = Counter(
            "pedl_metric_reports",
            "Metric reports ingested from trials, by group (training, validation, other).",
            ["group"],
            registry=r,
        )
        self.request_latency = Histogram(
            "pedl_api_request_duration_seconds",
            "HTTP request latency, by method, route template and status class.",
            ["method", "route", "status"],
            buckets=REQUEST_BUCKETS,
            registry=r,
        )

    @contextmanager
    def timed(self, histogram: Histogram) -> Iterator[None]:
        """Observe how long the block took in `histogram` (a labelled child or a plain histogram),
        whether it returned or raised."""
        start = self.timer()
        try:
            yield
        finally:
            histogram.observe(max(self.timer() - start, 0.0))

    def metric_report(self, group: str, count: int = 1) -> None:
        self.metric_reports.labels(group=group if group in METRIC_GROUPS else "other").inc(count)
