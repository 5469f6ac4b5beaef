"""An ASGI middleware that times each HTTP request into pedl_api_request_duration_seconds, labelled by
the matched route's template (/api/v1/trials/{trial_id}), never the raw path, so labels stay bounded.
WebSockets (agents, trial rooms) are long-lived connections, not requests: they pass through untimed."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pedl.master.observability.master_metrics import MasterMetrics

UNMATCHED = "<unmatched>"  # no route matched (a 404): one label for every such path
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})  # any other is "OTHER"


def route_template(scope: Scope) -> str:
    """The template of the route the router chose for this request (it leaves it in the scope)."""
    path = getattr(scope.get("route"), "path", None)
    return path if isinstance(path, str) and path else UNMATCHED


class RequestLatency:
    def __init__(self, app: ASGIApp, metrics: MasterMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client gets if the app raises before it answers

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        method = scope["method"] if scope["method"] in METHODS else "OTHER"
        start = self.metrics.timer()
        try:
            await self.app(scope, receive, send_status)
        finally:
            elapsed = max(self.metrics.timer() - start, 0.0)
            self.metrics.request_latency.labels(
                method=method, route=route_template(scope), status=f"{status // 100}xx"
            ).observe(elapsed)
