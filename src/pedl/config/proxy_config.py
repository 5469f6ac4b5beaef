"""master.yaml's `proxy:` section: the bounds on the master's proxy to a task's service (a notebook,
a TensorBoard) at /proxy/{task_id}/. Each relay costs the master a socket pair, so all are bounded."""

from __future__ import annotations

from pydantic import Field

from pedl.config.durations import Duration
from pedl.config.loading import StrictModel

MiB = 1024 * 1024


class ProxyConfig(StrictModel):
    connect_timeout: Duration = Field(
        default=10.0, description="how long the master waits to connect to a task's service"
    )
    idle_timeout: Duration = Field(
        default=1800.0,
        description="a relay (an HTTP exchange or a WebSocket) with no bytes either way for this long is "
        "closed; JupyterLab reconnects a closed kernel socket by itself",
    )
    max_relays_per_task: int = Field(
        default=64, ge=1, le=100_000, description="HTTP requests and WebSockets open at once through one task's proxy"
    )
    max_relays_per_user: int = Field(
        default=256,
        ge=1,
        le=100_000,
        description="HTTP requests and WebSockets open at once through the proxy per user",
    )
    max_request_body_bytes: int = Field(
        default=1024 * MiB, ge=1024, description="a request body sent to a task's service (streamed, never held whole)"
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        ge=1024,
        le=1024 * 1024,
        description="the headers of a request to, or an answer from, a service",
    )
    max_message_bytes: int = Field(
        default=16 * MiB,
        ge=1024,
        le=1024 * MiB,
        description="one WebSocket message from a task's service (uvicorn holds the browser's to 16 MiB)",
    )
    end_check_interval: Duration = Field(
        default=2.0,
        description="how often open relays are checked against their task: a relay of an ended task is closed",
    )
