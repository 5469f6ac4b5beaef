"""The WebSocket half of the master's proxy (Jupyter's kernels, terminals and events): a full duplex
relay of text and binary messages between the browser and the task's service, with close codes
passed through. Closed when either side closes, after `proxy.idle_timeout` without a message, or when
the task's allocation ends (1001, going away). A shell's WebSocket is bridged to a TCP stream instead
(api/proxy_tcp.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from fastapi import APIRouter, WebSocket
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.typing import Origin, Subprotocol

from pedl.config.proxy_config import ProxyConfig
from pedl.errors import BadGateway, PedlError
from pedl.master.api import proxy_headers, proxy_tcp, task_activity
from pedl.master.api.deps import ctx_of
from pedl.master.api.errors import error_response
from pedl.master.api.proxy_access import proxy_caller_or_none, proxy_relays
from pedl.master.api.proxy_relays import Relay, pump_until_done
from pedl.master.tasks import ProxyTarget, proxy_targets

log = logging.getLogger(__name__)
router = APIRouter()

UNSENDABLE = {1005: 1000, 1006: 1011, 1015: 1011}  # codes a close frame may not carry (RFC 6455 7.4.1)
GOING_AWAY = 1001


@router.websocket("/proxy/{task_id}/{path:path}")
async def proxy_websocket(websocket: WebSocket, task_id: str, path: str) -> None:
    ctx = ctx_of(websocket)
    try:
        found = await run_in_threadpool(lambda: proxy_caller_or_none(websocket, websocket=True))
        who, browser = found if found is not None else (None, False)
        target = await run_in_threadpool(
            lambda: proxy_targets.resolve(ctx, who, task_id, browser=browser, websocket=True)
        )
        await proxy_targets.verify(ctx, target)  # the port is still the task's
        # a tunnel without credentials counts against the task's owner, whose key it must hold
        user_id = who.user.id if who is not None else target.owner_id
        if target.tcp:
            await proxy_tcp.bridge(websocket, target, proxy_relays(websocket), user_id)
            return
        async with proxy_relays(websocket).open(target, user_id) as relay:
            upstream = await _connect(websocket, target, ctx.config.proxy)
            try:
                await websocket.accept(subprotocol=upstream.subprotocol)
                await _relay(websocket, upstream, relay, ctx.config.proxy)
            finally:
                await upstream.close()  # at once if the browser left before the accept; else already closed
    except PedlError as exc:
        await _deny(websocket, exc)


async def _deny(websocket: WebSocket, exc: PedlError) -> None:
    """The refusal as an HTTP answer to the handshake, where the server can send one (uvicorn can)."""
    with contextlib.suppress(Exception):
        if "websocket.http.response" in websocket.scope.get("extensions", {}):
            response: Response = error_response(exc)
            await websocket.send_denial_response(response)
        else:
            await websocket.close(code=1008, reason=exc.message[:120])


def _uri_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


async def _connect(websocket: WebSocket, target: ProxyTarget, config: ProxyConfig) -> ClientConnection:
    scope = websocket.scope
    raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
    if scope.get("query_string"):
        raw_path += "?" + scope["query_string"].decode("latin-1")
    hostport = f"{_uri_host(target.host)}:{target.port}"
    client = websocket.client.host if websocket.client else ""
    scheme = "https" if websocket.url.scheme == "wss" else "http"
    headers = proxy_headers.request_headers(websocket.headers.items(), client=client, scheme=scheme, websocket=True)
    # the client library writes Host as the service's address; Origin goes with it, so a service that
    # compares the two (Jupyter) accepts. The browser's origin was checked here (proxy_access.py).
    headers = [(k, v) for k, v in headers if k != "origin"] + list(target.headers)
    offered = proxy_headers.subprotocols(websocket.headers.items())
    where = f"the service of task {target.task_id} (port {target.port} on its agent)"
    try:
        return await connect(
            f"ws://{hostport}{raw_path}",
            additional_headers=headers,
            origin=Origin(f"http://{hostport}"),
            subprotocols=[Subprotocol(p) for p in offered] or None,
            open_timeout=config.connect_timeout,
            max_size=config.max_message_bytes,
            proxy=None,
            compression=None,
            user_agent_header=None,
        )
    except InvalidStatus as exc:
        raise BadGateway(f"{where} refused the WebSocket with HTTP {exc.response.status_code}") from None
    except TimeoutError:
        raise BadGateway(
            f"{where} did not accept a WebSocket within {config.connect_timeout:g} s (proxy.connect_timeout)"
        ) from None
    except (OSError, InvalidHandshake) as exc:
        raise BadGateway(f"{where} could not be reached: {type(exc).__name__}: {exc}") from None


async def _relay(websocket: WebSocket, upstream: ClientConnection, relay: Relay, config: ProxyConfig) -> None:
    loop = asyncio.get_running_loop()
    last = [loop.time()]
    outcome: dict[str, Any] = {}

    async def browser_to_service() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                code = message.get("code") or 1000
                outcome.update(side="browser", code=code, reason=message.get("reason") or "")
                return
            last[0] = loop.time()
            await task_activity.proxied(websocket, relay.target.task_id)
            text = message.get("text")
            try:
                await upstream.send(text if text is not None else message.get("bytes") or b"")
            except ConnectionClosed:
                outcome.update(side="service", code=upstream.close_code or 1006, reason=upstream.close_reason or "")
                return

    async def service_to_browser() -> None:
        try:
            async for data in upstream:
                last[0] = loop.time()
                if isinstance(data, str):
                    await websocket.send_text(data)
                else:
                    await websocket.send_bytes(data)
        except ConnectionClosed:
            pass
        except Exception:  # the browser is gone mid-send
            outcome.update(side="browser", code=1006, reason="")
            return
        outcome.update(side="service", code=upstream.close_code or 1006, reason=upstream.close_reason or "")

    await pump_until_done(
        relay,
        [browser_to_service, service_to_browser],
        idle_timeout=config.idle_timeout,
        last=last,
        outcome=outcome,
        silent="message",
    )
    code = int(outcome.get("code") or 1011)
    code = UNSENDABLE.get(code, code)
    # a close frame carries at most 123 bytes of reason
    reason = str(outcome.get("reason") or "").encode()[:120].decode(errors="ignore")
    if outcome.get("side") != "service":
        with contextlib.suppress(Exception):
            await upstream.close(code=code, reason=reason)
    else:
        await upstream.close()
    if outcome.get("side") != "browser":
        with contextlib.suppress(Exception):
            await websocket.close(code=code, reason=reason)
