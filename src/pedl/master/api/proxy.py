"""The master's proxy to a task's service (a notebook, a TensorBoard): /proxy/{task_id}/... relayed
over HTTP, streamed both ways, to the port the task registered on its agent, as Determined's master
does. The service is started with the base URL /proxy/{task_id}/ and gets the whole path.

Only the task's owner or an admin passes (tasks/proxy_targets.py), with a login token or the
WebUI's session cookie; a task token never does, nor DET_USER_TOKEN. Before each relay the agent checks
that the port is still the task's. WebSockets: api/proxy_websocket.py."""

from __future__ import annotations

import asyncio
import weakref
from typing import Any

import httpx
from fastapi import APIRouter, Depends, Request, Response
from starlette.concurrency import run_in_threadpool
from starlette.types import Message, Receive, Scope, Send

from pedl.errors import BadGateway, InvalidArgument, NotFound, PedlError
from pedl.master.api import proxy_headers, task_activity
from pedl.master.api.deps import Body, Caller, caller, ctx_of, json_body, parse
from pedl.master.api.errors import error_response
from pedl.master.api.proxy_access import proxy_caller, proxy_relays
from pedl.master.api.proxy_relays import ProxyRelays, Relay
from pedl.master.tasks import MIN_PORT, ProxyTarget, proxy_targets

router = APIRouter()

METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]


class ProxyPortBody(Body):
    port: int


@router.post("/api/v1/allocations/{allocation_id}/proxy_port")
def register_proxy_port(
    allocation_id: str, request: Request, who: Caller = Depends(caller), body: Any = Depends(json_body)
) -> dict:
    """The task's service listens on this port of its agent: the target of /proxy/{task_id}/."""
    port = parse(ProxyPortBody, body).port
    if not MIN_PORT <= port <= 65535:
        raise InvalidArgument.at("port", f"must be a port from {MIN_PORT} to 65535")
    proxy_targets.register_port(ctx_of(request), who, allocation_id, port)
    return {}


@router.api_route("/proxy/{task_id}/{path:path}", methods=METHODS, include_in_schema=False)
async def proxy_http(task_id: str, path: str, request: Request) -> Response:  # the raw path is used
    ctx = ctx_of(request)
    who, browser = await run_in_threadpool(proxy_caller, request)
    target = await run_in_threadpool(lambda: proxy_targets.resolve(ctx, who, task_id, browser=browser))
    await proxy_targets.verify(ctx, target)  # the port is still the task's (a relay of its own, each request)
    client = request.client.host if request.client else ""
    headers = proxy_headers.request_headers(request.headers.items(), client=client, scheme=request.url.scheme)
    if proxy_headers.header_bytes(headers) > ctx.config.proxy.max_header_bytes:
        raise InvalidArgument.at(
            "headers", f"larger than {ctx.config.proxy.max_header_bytes} bytes (proxy.max_header_bytes)"
        )
    has_body = _has_body([(k.lower(), v) for k, v in request.headers.items()])
    headers += target.headers
    await task_activity.proxied(request, target.task_id)
    return UpstreamResponse(proxy_relays(request), target, who.user.id, headers, has_body)


_clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, httpx.AsyncClient] = weakref.WeakKeyDictionary()


def upstream_client(connect_timeout: float, idle_timeout: float) -> httpx.AsyncClient:
    """One pooled client per event loop (the master has one; tests' clients may have several). It
    never reads proxy settings from the environment, never follows redirects and adds no headers."""
    loop = asyncio.get_running_loop()
    client = _clients.get(loop)
    if client is None:
        timeout = httpx.Timeout(idle_timeout, connect=connect_timeout, pool=connect_timeout)
        client = httpx.AsyncClient(
            trust_env=False,
            follow_redirects=False,
            timeout=timeout,
            limits=httpx.Limits(max_connections=None, max_keepalive_connections=64),
        )
        client.headers.clear()
        _clients[loop] = client
    return client


def _has_body(headers: list[tuple[str, str]]) -> bool:
    for name, value in headers:
        if name == "transfer-encoding" or (name == "content-length" and value.strip() not in ("", "0")):
            return True
    return False


def _upstream_error(exc: httpx.HTTPError, target: ProxyTarget, connect_timeout: float) -> BadGateway:
    where = f"the service of task {target.task_id} (port {target.port} on its agent)"
    if isinstance(exc, httpx.ConnectTimeout | httpx.PoolTimeout):
        return BadGateway(f"{where} did not accept a connection within {connect_timeout:g} s (proxy.connect_timeout)")
    if isinstance(exc, httpx.ConnectError):
        return BadGateway(f"{where} refused the connection: is it listening? ({exc})")
    if isinstance(exc, httpx.TimeoutException):
        return BadGateway(f"{where} went silent for longer than proxy.idle_timeout")
    return BadGateway(f"{where} failed: {type(exc).__name__}: {exc}")


class UpstreamResponse(Response):
    """Relays the request to the service and its answer back, chunk by chunk: the request body is
    read from the browser only as fast as the service takes it, and the answer's as fast as the
    browser reads it. The relay slot is held until the last byte."""

    def __init__(
        self, relays: ProxyRelays, target: ProxyTarget, user_id: int, headers: list[tuple[str, str]], has_body: bool
    ) -> None:
        super().__init__()
        self.relays, self.target, self.user_id, self.forward = relays, target, user_id, headers
        self.has_body = has_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = False

        async def send_tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            async with self.relays.open(self.target, self.user_id) as relay:
                await self._relay(relay, scope, receive, send_tracked)
        except PedlError as exc:
            # once the answer has started nothing more can be said: returning without its end makes the
            # server cut the connection, so the browser sees an incomplete body, not one that looks whole
            if not started:
                await error_response(exc)(scope, receive, send)

    async def _relay(self, relay: Relay, scope: Scope, receive: Receive, send: Send) -> None:
        config = self.relays.config
        raw_path = scope.get("raw_path") or scope["path"].encode()
        if scope.get("query_string"):
            raw_path += b"?" + scope["query_string"]
        url = httpx.URL(scheme="http", host=self.target.host, port=self.target.port, raw_path=raw_path)
        client = upstream_client(config.connect_timeout, config.idle_timeout)

        async def request_body():  # an async iterator of the browser's chunks
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body"):
                    return

        body = request_body() if self.has_body else None
        request = client.build_request(scope["method"], url, headers=self.forward, content=body)
        pump = asyncio.ensure_future(
            self._pump(client, request, send, config.idle_timeout, config.connect_timeout, config.max_header_bytes)
        )

        async def task_ended() -> None:
            pump.cancel()

        relay.on_end(task_ended)
        try:
            await pump
        except asyncio.CancelledError:
            if not relay.ended.is_set():
                raise
            raise NotFound(f"task {self.target.task_id} has ended; its service is gone") from None

    async def _pump(
        self,
        client: httpx.AsyncClient,
        request: httpx.Request,
        send: Send,
        idle: float,
        connect_timeout: float,
        max_header_bytes: int,
    ) -> None:
        try:
            upstream = await client.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise _upstream_error(exc, self.target, connect_timeout) from None
        try:
            if (
                proxy_headers.header_bytes((k.decode("latin-1"), v.decode("latin-1")) for k, v in upstream.headers.raw)
                > max_header_bytes
            ):
                raise BadGateway(
                    f"the service of task {self.target.task_id} answered with headers larger than "
                    f"{max_header_bytes} bytes (proxy.max_header_bytes)"
                )
            headers = proxy_headers.response_headers(
                (k.decode("latin-1"), v.decode("latin-1")) for k, v in upstream.headers.raw
            )
            await asyncio.wait_for(
                send(
                    {
                        "type": "http.response.start",
                        "status": upstream.status_code,
                        "headers": [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers],
                    }
                ),
                idle,
            )
            try:
                async for chunk in upstream.aiter_raw():
                    # a browser that stops reading holds the relay no longer than the idle timeout
                    await asyncio.wait_for(send({"type": "http.response.body", "body": chunk, "more_body": True}), idle)
            except httpx.HTTPError:
                pass  # the service broke off after answering: end the body as far as it came
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            await upstream.aclose()
