"""master.yaml's `server:` section: how long a client may take to send a request, and how many connections
the master holds open, in total and per client address. A client that breaks them is cut off."""

from __future__ import annotations

from pydantic import Field

from pedl.config.durations import Duration
from pedl.config.loading import StrictModel


class ServerConfig(StrictModel):
    header_read_timeout: Duration = Field(
        default=10.0,
        gt=0,
        description="a request's line and headers must have arrived this long after the connection "
        "opened, or after the request's first byte (nginx's client_header_timeout); "
        "else 408 and the connection is closed",
    )
    body_read_timeout: Duration = Field(
        default=30.0,
        gt=0,
        description="the longest pause while a request body arrives, between two reads "
        "(nginx's client_body_timeout); the master's own waits do not count",
    )
    keep_alive_timeout: Duration = Field(
        default=5.0, gt=0, description="an idle connection between two requests is closed after this"
    )
    max_header_bytes: int = Field(
        default=64 * 1024, ge=4096, le=1024 * 1024, description="a request's line and headers together; more is a 431"
    )
    max_connections: int = Field(
        default=4096,
        ge=16,
        le=1_000_000,
        description="connections open at once, WebSockets (agents, proxied services) included; past it a new one "
        "gets 503 and is closed. The master lowers it to fit its open-file limit, which it raises to the "
        "hard limit at start",
    )
    max_connections_per_address: int = Field(
        default=256,
        ge=1,
        le=1_000_000,
        description="HTTP connections open at once from one client address; past it a new one gets 429 and is "
        "closed. A connection that became a WebSocket no longer counts here (each WebSocket route holds "
        "its own bound: agent credentials, the proxy's relays per task and user), so agents behind one "
        "NAT address are never refused by it; nor does a security.trusted_proxies address, which "
        "speaks for many clients",
    )
