"""The body of a metric batch (POST /api/v1/trials/{id}/metrics/batch), parsed on a lean path.

pedl.core's sender posts up to a thousand reports at once, as fast as a trial makes them, so the
master's cost per report is what bounds ingestion. The general body path (bounded_json.parse_json,
then the models' one-walk check and pydantic) costs ~45 µs a report; this one ~5 µs:

- orjson parses the body (it refuses NaN, Infinity, numbers beyond a double, lone surrogates and
  nesting past 1,024 levels by itself, and reads an integer past 64 bits as a float);
- one loop accepts a batch only when it is plainly well formed: known keys, the types the models
  declare, integers within 64 bits, scalar metric values, strings within limits.

Anything else, from a malformed body to a metric value that is a list, goes down the general path,
which accepts what the models accept and refuses the rest with the usual 400 naming the field. So
the lean path changes no answer: it only decides sooner for the common body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from pydantic import Field

from pedl.config.storable_values import INT64_MAX
from pedl.master.api.bounded_json import parse_json
from pedl.master.api.deps import CheckedBody, parse_checked
from pedl.master.services import metrics
from pedl.master.services.metric_batches import MAX_REPORTS, Report

if TYPE_CHECKING:
    from pedl.config.security_config import LimitsConfig


class BatchedMetrics(CheckedBody):
    avgMetrics: dict[str, Any]
    batchMetrics: list[Any] | None = None


class BatchedReport(CheckedBody):
    group: str = Field("training", min_length=1, max_length=64)
    stepsCompleted: int = Field(..., ge=0, le=INT64_MAX)
    trialRunId: int = Field(0, ge=0, le=INT64_MAX)
    reportTime: str | None = None
    metrics: BatchedMetrics


class MetricBatchBody(CheckedBody):
    reports: list[BatchedReport] = Field(..., min_length=1, max_length=MAX_REPORTS)


NUL_ESCAPE = b"\\u0000"  # orjson takes it; no column takes a NUL
BIG = 2.0**63  # a float this large may have been an integer literal past 64 bits, which the models refuse
_REPORT_KEYS = frozenset({"group", "stepsCompleted", "trialRunId", "reportTime", "metrics"})
_METRICS_KEYS = frozenset({"avgMetrics", "batchMetrics"})
BODY_DEPTH = 5  # {"reports": [{"metrics": {"avgMetrics": {...}}}]}


def parse(raw: bytes, limits: LimitsConfig) -> list[Report]:
    """The batch's reports, each with its metric values as they are stored (JSON, non-finite floats
    as the strings "NaN", "Infinity" and "-Infinity"). Raises InvalidArgument naming the field."""
    reports = _lean(raw, limits)
    return reports if reports is not None else _general(raw, limits)


def _lean(raw: bytes, limits: LimitsConfig) -> list[Report] | None:
    """The reports of a plainly well-formed batch, None for anything else."""
    if limits.max_nesting_depth < BODY_DEPTH or NUL_ESCAPE in raw:
        return None
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if type(body) is not dict or len(body) != 1:
        return None
    items = body.get("reports")
    if type(items) is not list or not 0 < len(items) <= MAX_REPORTS:
        return None
    max_string = limits.max_string_length
    out = []
    checked_names: Any = None  # the last report's metric names, once their lengths were checked
    for item in items:
        if type(item) is not dict or not _REPORT_KEYS.issuperset(item):
            return None
        group = item.get("group", "training")
        steps = item.get("stepsCompleted")
        run = item.get("trialRunId", 0)
        box = item.get("metrics")
        when = item.get("reportTime")
        if (type(group) is not str or not 0 < len(group) <= 64
                or type(steps) is not int or not 0 <= steps <= INT64_MAX
                or type(run) is not int or not 0 <= run <= INT64_MAX
                or not (when is None or (type(when) is str and len(when) <= max_string))
                or type(box) is not dict or not _METRICS_KEYS.issuperset(box)
                or box.get("batchMetrics") not in (None, [])):
            return None
        values = box.get("avgMetrics")
        if type(values) is not dict:
            return None
        names = values.keys()
        if names != checked_names:  # (a training loop's reports name the same metrics: checked once)
            if any(len(name) > max_string for name in names):
                return None
            checked_names = names
        for value in values.values():
            kind = type(value)
            if kind is float:
                if not -BIG < value < BIG:
                    return None
            elif not (value is None or kind is bool or (kind is int and -INT64_MAX - 1 <= value <= INT64_MAX)
                      or (kind is str and len(value) <= max_string)):
                return None
        out.append(Report(group, steps, run, values))
    return out


def _general(raw: bytes, limits: LimitsConfig) -> list[Report]:
    """The general body path: what the models accept, or their 400."""
    body = parse_json(raw, limits) if raw.strip() else {}
    req = parse_checked(MetricBatchBody, body)
    return [Report(r.group, r.stepsCompleted, r.trialRunId, metrics.json_safe(metrics.clean_metrics(
        r.metrics.avgMetrics, f"reports[{i}].metrics.avgMetrics"))) for i, r in enumerate(req.reports)]

