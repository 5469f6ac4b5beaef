"""Trial source infos: a task reports that its trial uses a checkpoint or a model version (Determined's
core_context.experimental.report_task_using_checkpoint/_model_version), and the metric reports of such
trials are read by checkpoint (api/checkpoints.py) or by model version (here), as the SDK's get_metrics."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import Field
from starlette.concurrency import run_in_threadpool

from pedl.master.api.deps import INT64_MAX, Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.model_registry import INT32_MAX, ModelName, VersionNum
from pedl.master.api.openapi import accepts
from pedl.master.checkpoints import metrics as checkpoint_metrics
from pedl.master.trials import source_infos as trial_source_infos
from pedl.master.wire.metrics import MetricsReport

router = APIRouter()

TrialSourceInfoType = Literal[
    "TRIAL_SOURCE_INFO_TYPE_UNSPECIFIED", "TRIAL_SOURCE_INFO_TYPE_INFERENCE", "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING"
]
SourceTypeQuery = Annotated[
    TrialSourceInfoType | None, Query(description="only the trials linked this way; none or UNSPECIFIED: every link")
]
MetricGroupQuery = Annotated[str | None, Query(max_length=64, description="one group; none: every group")]


class TrialSourceInfoIn(Body):
    """Determined's v1TrialSourceInfo."""

    trialId: int = Field(..., ge=1, le=INT64_MAX)
    checkpointUuid: str = Field(..., max_length=64)
    trialSourceInfoType: Literal["TRIAL_SOURCE_INFO_TYPE_INFERENCE", "TRIAL_SOURCE_INFO_TYPE_FINE_TUNING"]
    modelId: int | None = Field(None, ge=0, le=INT32_MAX)
    modelVersion: int | None = Field(None, ge=0, le=INT32_MAX)


class ReportTrialSourceInfoBody(Body):
    trialSourceInfo: TrialSourceInfoIn


@router.post("/api/v1/trial-source-info")
@accepts(ReportTrialSourceInfoBody, errors=(404,))  # an unknown checkpoint or model version
def report(request: Request, who: Caller = Depends(caller), body: dict = Depends(json_body)) -> dict:
    """The trial uses the checkpoint (and the model version, when given); only its own task token may
    say so. Reporting it again changes nothing."""
    info = parse(ReportTrialSourceInfoBody, body).trialSourceInfo
    trial_source_infos.report(
        ctx_of(request),
        who,
        trial_id=info.trialId,
        checkpoint_uuid=info.checkpointUuid,
        source_type=info.trialSourceInfoType,
        model_id=info.modelId,
        model_version=info.modelVersion,
    )
    return {"trialId": info.trialId, "checkpointUuid": info.checkpointUuid}


def reports_response(pages: Iterator[list[MetricsReport]], group: str | None) -> StreamingResponse:
    """`{"metrics": [v1MetricsReport]}`, written a page of reports at a time. With every group, a
    validation report carries its values under avg_metrics too: the SDK reads avg_metrics of every
    report when no group is named."""

    def report(m: MetricsReport) -> dict:
        shown = m.model_dump(exclude_unset=True)
        if not group:
            shown["metrics"].setdefault("avg_metrics", shown["metrics"].get("validation_metrics"))
        return shown

    async def body() -> AsyncIterator[str]:
        yield '{"metrics":['
        sep = ""
        while (page := await run_in_threadpool(next, pages, None)) is not None:
            yield sep + ",".join(json.dumps(report(m)) for m in page)
            sep = ","
        yield "]}"

    return StreamingResponse(body(), media_type="application/json")


@router.get("/api/v1/models/{modelName}/versions/{modelVersionNum}/metrics")
def version_metrics(
    modelName: ModelName,
    modelVersionNum: VersionNum,
    request: Request,
    _: Caller = Depends(caller),
    metricGroup: MetricGroupQuery = None,
    trialSourceInfoType: SourceTypeQuery = None,
) -> StreamingResponse:
    """The SDK's model_version.get_metrics(group): the reports of the trials that reported using the
    version (report_task_using_model_version)."""
    ctx = ctx_of(request)
    linked = checkpoint_metrics.of_version(ctx, modelName, modelVersionNum, trialSourceInfoType)
    return reports_response(checkpoint_metrics.pages(ctx, linked, metricGroup or None), metricGroup or None)
