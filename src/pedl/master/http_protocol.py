"""The master's HTTP connections: uvicorn's httptools protocol with what uvicorn lacks, a deadline for a
request's headers and for each pause in its body, a bound on header bytes, and caps on open connections."""

from __future__ import annotations

import asyncio
import functools
import ipaddress
import json
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    from uvicorn._types import HTTPScope

from pedl.config.server_config import ServerConfig

log = logging.getLogger("pedl.master.connections")

# set in a request's scope when the master cut its body off: the app's ClientDisconnect line says why
BODY_TIMED_OUT = "pedl.body_read_timeout"
# set in the scope of a request that came through the console socket (data_dir/console.sock, mode 0600):
# its client is the master's own OS user (or root), on the master's host
CONSOLE = "pedl.console"
RARE_LOG_SECONDS = 60.0


def _extend(scope: HTTPScope, key: str, value: object) -> None:
    """Set a key of pedl's own in a request's scope: ASGI lets a server add such extensions, though
    uvicorn's HTTPScope TypedDict names none."""
    cast(dict[str, Any], scope)[key] = value


class RareLog:
    """A warning of each kind at most once a minute, with how many more there were: a flood of
    refused connections is a few lines, not one per connection."""

    def __init__(
        self, logger: logging.Logger, every: float = RARE_LOG_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger, self.every, self.clock = logger, every, clock
        self._last: dict[str, float] = {}
        self._since: dict[str, int] = {}

    def warn(self, kind: str, message: str) -> None:
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.every:
            self._since[kind] = self._since.get(kind, 0) + 1
            return
        more = self._since.pop(kind, 0)  # (counted only after a first warning: `last` is set)
        self._last[kind] = now
        self.logger.warning(
            "%s%s",
            message,
            f" ({more} more like it in the last {now - last:.0f} s)" if more and last is not None else "",
        )


class ConnectionCaps:
    """HTTP connections open per client address, against server.max_connections_per_address, and the
    total (uvicorn's own set of connections, WebSockets included) against server.max_connections. An
    address in security.trusted_proxies speaks for many clients: it counts in the total only."""

    def __init__(self, total: int, per_address: int, trusted_proxies: list[str]) -> None:
        self.total, self.per_address = total, per_address
        self._trusted = [ipaddress.ip_network(n, strict=False) for n in trusted_proxies]
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()  # one event loop uses it; the lock keeps tests' threads honest too

    @functools.lru_cache(maxsize=4096)  # noqa: B019 - one instance per master, addresses are few
    def exempt(self, host: str) -> bool:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(address in network for network in self._trusted)

    def admit(self, host: str, open_total: int) -> tuple[int, str] | None:
        """Count a new connection from `host`, or say (status, why) it is refused."""
        if open_total >= self.total:
            return 503, f"the master has {open_total} connections open (server.max_connections: {self.total})"
        if self.exempt(host):
            return None
        with self._lock:
            if self._open.get(host, 0) >= self.per_address:
                return 429, (
                    f"{host} has {self.per_address} connections open "
                    f"(server.max_connections_per_address: {self.per_address})"
                )
            self._open[host] = self._open.get(host, 0) + 1
        return None

    def release(self, host: str) -> None:
        if self.exempt(host):
            return
        with self._lock:
            left = self._open.get(host, 0) - 1
            if left > 0:
                self._open[host] = left
            else:
                self._open.pop(host, None)

    def open_from(self, host: str) -> int:
        return self._open.get(host, 0)


class TimedFlowControl(FlowControl):
    """uvicorn's flow control, noting when reading resumed: a body's pause while the master itself
    stopped reading (the app had not yet taken what arrived) is not the client's."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(transport)
        self._loop = loop
        self.resumed_at = 0.0

    def resume_reading(self) -> None:
        if self.read_paused:
            self.resumed_at = self._loop.time()
        super().resume_reading()


def raw_response(status: int, reason: str, code: str, message: str, headers: tuple[str, ...] = ()) -> bytes:
    """An error answer written straight to the socket, in the shape of PedlError.to_dict, closing the
    connection: for what the master decides before (or instead of) the app."""
    body = json.dumps(
        {
            "code": 8 if status == 429 else 14 if status == 503 else 3,
            "pedlCode": code,
            "message": message,
            "error": {"reason": reason, "error": message, "message": message},
        },
        ensure_ascii=True,
    ).encode()
    head = [
        f"HTTP/1.1 {status} {reason}",
        "content-type: application/json",
        f"content-length: {len(body)}",
        "connection: close",
        *headers,
    ]
    return ("\r\n".join(head) + "\r\n\r\n").encode("ascii") + body


class MasterHttpProtocol(HttpToolsProtocol):
    """One HTTP connection. `settings` and `caps` are bound per master by `bound()`."""

    settings: ServerConfig
    caps: ConnectionCaps
    rare: RareLog

    @classmethod
    def bound(cls, settings: ServerConfig, caps: ConnectionCaps) -> type[MasterHttpProtocol]:
        return type("MasterHttpProtocol", (cls,), {"settings": settings, "caps": caps, "rare": RareLog(log)})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._address: str | None = None  # counted in caps while set
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._body_seen = 0.0  # loop time of the body's latest bytes
        self._awaiting_headers = True
        self._header_bytes = 0
        self._console = False

    # -- the connection ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:
        super().connection_made(transport)
        self.flow = TimedFlowControl(transport, self.loop)
        sock = transport.get_extra_info("socket")
        self._console = sock is not None and sock.family == socket.AF_UNIX
        if self._console:  # the master's own user: held to the timeouts only
            self._header_timer = self.loop.call_later(self.settings.header_read_timeout, self._header_timeout)
            return
        host = self.client[0] if self.client else ""
        refusal = self.caps.admit(host, len(self.connections) - 1)
        if refusal is not None:
            status, why = refusal
            self.rare.warn(f"refused {status}", f"refused a connection from {host}: {why}")
            reason, code = (
                ("Too Many Requests", "too_many_requests") if status == 429 else ("Service Unavailable", "unavailable")
            )
            self._answer_and_close(
                raw_response(status, reason, code, f"too many connections: {why}", ("retry-after: 1",))
            )
            return
        self._address = host
        self._header_timer = self.loop.call_later(self.settings.header_read_timeout, self._header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timers()
        self._release()
        super().connection_lost(exc)

    def handle_websocket_upgrade(self) -> None:
        # a WebSocket is held to its route's own bound (an agent's credential, the proxy's relays per task
        # and user), not its address's: agents behind one NAT address are never refused for it
        self._stop_timers()
        self._release()
        super().handle_websocket_upgrade()

    def _release(self) -> None:
        if self._address is not None:
            self.caps.release(self._address)
            self._address = None

    def _stop_timers(self) -> None:
        for timer in (self._header_timer, self._body_timer):
            if timer is not None:
                timer.cancel()
        self._header_timer = self._body_timer = None

    def _answer_and_close(self, response: bytes) -> None:
        if not self.transport.is_closing():
            self.transport.write(response)
            self.transport.close()

    # -- headers: a deadline and a size ----------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self._awaiting_headers:
            self._header_bytes += len(data)
        super().data_received(data)
        limit = self.settings.max_header_bytes
        if self._awaiting_headers and self._header_bytes > limit and not self.transport.is_closing():
            self.rare.warn("431", f"refused a request from {self._peer()}: headers over {limit} bytes")
            self._answer_and_close(
                raw_response(
                    431,
                    "Request Header Fields Too Large",
                    "invalid_argument",
                    f"the request line and headers are over {limit} bytes (server.max_header_bytes)",
                )
            )

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._console:
            _extend(self.scope, CONSOLE, True)
        if self._header_timer is None:  # a later request on the connection: its deadline starts now
            self._header_timer = self.loop.call_later(self.settings.header_read_timeout, self._header_timeout)

    def on_headers_complete(self) -> None:
        self._awaiting_headers = False
        self._header_bytes = 0
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        self._close_if_answered_early()
        self._body_seen = self.loop.time()
        if self._body_timer is None:
            self._body_timer = self.loop.call_later(self.settings.body_read_timeout, self._body_timeout)

    def _close_if_answered_early(self) -> None:
        """A request answered before its body arrived (a 413, a 401) is answered with Connection: close, and
        the connection closes after the answer rather than read and drop what is left of the body, which may
        be megabytes or never end. (The cycle's task has not run yet: its app gets this send.)"""
        cycle = self.cycle
        if cycle is None or cycle.response_started:
            return
        send = cycle.send

        async def send_closing(message: Any) -> None:
            if message["type"] == "http.response.start" and cycle.more_body:
                cycle.keep_alive = False  # uvicorn adds Connection: close, and closes once the answer is out
            await send(message)

        cycle.send = send_closing

    def _header_timeout(self) -> None:
        self._header_timer = None
        if self.transport.is_closing():
            return
        timeout = self.settings.header_read_timeout
        self.rare.warn(
            "408 headers",
            f"closed a connection from {self._peer()}: no whole request line and headers "
            f"in {timeout:g} s (server.header_read_timeout)",
        )
        self._answer_and_close(
            raw_response(
                408,
                "Request Timeout",
                "invalid_argument",
                f"the request's headers took over {timeout:g} s (server.header_read_timeout)",
            )
        )

    # -- the body: a deadline for each pause -----------------------------------------------------

    def on_body(self, body: bytes) -> None:
        self._body_seen = self.loop.time()
        super().on_body(body)

    def on_message_complete(self) -> None:
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        self._awaiting_headers = True  # the next request on the connection, whenever it comes
        super().on_message_complete()

    def _body_timeout(self) -> None:
        self._body_timer = None
        if self.transport.is_closing():
            return
        timeout = self.settings.body_read_timeout
        now = self.loop.time()
        flow = self.flow
        if flow.read_paused:  # the master is not reading: its own wait
            self._body_seen = now
        waited = now - max(self._body_seen, getattr(flow, "resumed_at", 0.0))
        if waited < timeout:
            self._body_timer = self.loop.call_later(timeout - waited, self._body_timeout)
            return
        cycle = self.cycle
        if cycle is not None:
            _extend(cycle.scope, BODY_TIMED_OUT, timeout)
        if cycle is None or not cycle.response_started:
            self._answer_and_close(
                raw_response(
                    408,
                    "Request Timeout",
                    "invalid_argument",
                    f"no request body bytes for {timeout:g} s (server.body_read_timeout)",
                )
            )
        else:
            self.transport.close()

    def _peer(self) -> str:
        return self.client[0] if self.client else "?"
