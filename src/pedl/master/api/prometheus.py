"""GET /metrics for Prometheus, open to whom master.yaml's `security.metrics_access` says:
anyone, any logged-in user (a bearer token in the scrape config), or admins only. It serves this
master's own registry (master/observability/); docs/reference/metrics.md lists the metrics."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pedl.master.api.deps import caller, ctx_of
from pedl.master.identity import require_admin

router = APIRouter()


@router.get("/metrics", include_in_schema=False)
def prometheus(request: Request) -> PlainTextResponse:
    ctx = ctx_of(request)
    access = ctx.config.security.metrics_access
    if access != "public":
        who = caller(request)
        if access == "admin":
            require_admin(who, "read /metrics (security.metrics_access: admin)")
    return PlainTextResponse(generate_latest(ctx.metrics.registry).decode(), media_type=CONTENT_TYPE_LATEST)
