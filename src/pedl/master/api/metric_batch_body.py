"""The body of a metric batch (POST /api/v1/trials/{id}/metrics/batch), parsed on a lean path.

pedl.core's sender posts up to 4,000 reports at once, as fast as a trial makes them, so the
master's cost per report is what bounds ingestion. The general body path (bounded_json.parse_json,
then the models' one-walk check and pydantic) costs ~45 µs a report; this one ~2 µs:

- msgspec parses the body into typed structs (it refuses NaN, Infinity, lone surrogates and bytes
  that are not UTF-8 by itself) and, in the same pass, accepts a batch only when it is plainly well
  formed: known keys, the types the models declare, integers within 64 bits, scalar metric values,
  strings within limits.

Anything else, from a malformed body to a metric value that is a list, goes down the general path,
which accepts what the models accept and refuses the rest with the usual 400 naming the field. So
the lean path changes no answer: it only decides sooner for the common body."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any, Optional, Union

import msgspec
from pydantic import Field

from pedl.config.storable_values import INT64_MAX
from pedl.master.api.bounded_json import parse_json
from pedl.master.api.deps import CheckedBody, parse_checked
from pedl.master.metrics import MAX_REPORTS, Report
from pedl.master.metrics import service as metrics

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


NUL_ESCAPE = b"\\u0000"  # msgspec takes it; no column takes a NUL
BIG = 2.0**63  # a float this large may have been an integer literal past 64 bits, which the models refuse
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
        body = _decoder(limits.max_string_length).decode(raw)
    except (msgspec.MsgspecError, ValueError):  # (ValueError: bytes that are not UTF-8)
        return None
    return [Report(r.group, r.stepsCompleted, r.trialRunId, r.metrics.avgMetrics) for r in body.reports]


@functools.lru_cache(maxsize=4)
def _decoder(max_string: int) -> msgspec.json.Decoder:
    """A decoder that takes exactly the plainly well-formed batches, for strings up to `max_string`
    (a limit from the master's config): known keys, the types the models declare, integers within 64 bits,
    floats that cannot have been an integer past them, scalar metric values, strings within limits.
    msgspec checks all of it in C, as it parses (a loop over orjson's dicts was a third of the master's
    CPU while it stored 50,000 reports a second)."""
    text = Annotated[str, msgspec.Meta(max_length=max_string)]
    value = Union[  # noqa: UP007 (msgspec reads a typing.Union of Annotated members)
        Annotated[float, msgspec.Meta(gt=-BIG, lt=BIG)],
        Annotated[int, msgspec.Meta(ge=-INT64_MAX - 1, le=INT64_MAX)],
        bool,
        None,
        text,
    ]
    count = Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]

    # (defstruct: the types are this call's locals, which a class body's string annotations could not name)
    metrics = msgspec.defstruct(
        "Metrics",
        [
            ("avgMetrics", dict[text, value]),
            ("batchMetrics", Optional[Annotated[list[None], msgspec.Meta(max_length=0)]], None),  # noqa: UP045
        ],
        forbid_unknown_fields=True,
        gc=False,
    )
    entry = msgspec.defstruct(
        "Entry",
        [
            ("metrics", metrics),
            ("stepsCompleted", count),
            ("group", Annotated[str, msgspec.Meta(min_length=1, max_length=64)], "training"),
            ("trialRunId", count, 0),
            ("reportTime", Optional[text], None),  # noqa: UP045
        ],
        forbid_unknown_fields=True,
        gc=False,
    )
    batch = msgspec.defstruct(
        "Batch",
        [
            ("reports", Annotated[list[entry], msgspec.Meta(min_length=1, max_length=MAX_REPORTS)]),
        ],
        forbid_unknown_fields=True,
        gc=False,
    )
    return msgspec.json.Decoder(batch)


def _general(raw: bytes, limits: LimitsConfig) -> list[Report]:
    """The general body path: what the models accept, or their 400."""
    body = parse_json(raw, limits) if raw.strip() else {}
    req = parse_checked(MetricBatchBody, body)
    return [
        Report(
            r.group,
            r.stepsCompleted,
            r.trialRunId,
            metrics.json_safe(metrics.clean_metrics(r.metrics.avgMetrics, f"reports[{i}].metrics.avgMetrics")),
        )
        for i, r in enumerate(req.reports)
    ]
