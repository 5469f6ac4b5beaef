"""A shell's tunnel through the master's proxy: the WebSocket that det's `tunnel` (ssh's ProxyCommand)
opens to /proxy/{task_id}/, bridged to a plain TCP connection to sshd on the task's agent, as
Determined's master does for a `proxy_tcp` port. Each message's payload goes to the stream as it is
(text as UTF-8); what the stream gives comes back in binary messages of at most CHUNK bytes.

Bounded as the other relays (api/proxy_relays.py): a slot per tunnel, closed after
`proxy.idle_timeout` without a byte either way or when the task's allocation ends (1001)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any

from fastapi import WebSocket

from pedl.config.proxy_config import ProxyConfig
from pedl.errors import BadGateway
from pedl.master.api.proxy_relays import ProxyRelays, Relay, pump_until_done
from pedl.master.tasks import ProxyTarget

CHUNK = 64 * 1024  # the most bytes of the stream one message carries
NORMAL, GOING_AWAY, INTERNAL = 1000, 1001, 1011


def payload(message: Mapping[str, Any]) -> bytes | None:
    """The bytes an ASGI `websocket.receive` message carries to the stream; None: the client left."""
    if message["type"] == "websocket.disconnect":
        return None
    text = message.get("text")
    return text.encode() if text is not None else (message.get("bytes") or b"")


async def bridge(websocket: WebSocket, target: ProxyTarget, relays: ProxyRelays, user_id: int) -> None:
    """The tunnel's whole life. A refusal (too many relays, sshd unreachable) is raised before the
    WebSocket is accepted, so the caller answers the handshake with it."""
    async with relays.open(target, user_id) as relay:
        reader, writer = await _connect(target, relays.config)
        try:
            await websocket.accept()
            await _pump(websocket, reader, writer, relay, relays.config)
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()


async def _connect(target: ProxyTarget, config: ProxyConfig) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    where = f"the sshd of shell {target.task_id} (port {target.port} on its agent)"
    try:
        return await asyncio.wait_for(
            asyncio.open_connection(target.host, target.port, limit=CHUNK), config.connect_timeout
        )
    except TimeoutError:
        raise BadGateway(
            f"{where} did not accept a connection within {config.connect_timeout:g} s (proxy.connect_timeout)"
        ) from None
    except OSError as exc:
        raise BadGateway(f"{where} refused the connection: is it listening? ({exc})") from None


async def _pump(
    websocket: WebSocket, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, relay: Relay, config: ProxyConfig
) -> None:
    loop = asyncio.get_running_loop()
    last = [loop.time()]
    outcome: dict[str, Any] = {}

    async def client_to_service() -> None:
        while True:
            data = payload(await websocket.receive())
            if data is None:
                outcome.update(side="client", code=NORMAL, reason="")
                return
            last[0] = loop.time()
            if not data:
                continue
            try:
                writer.write(data)
                await writer.drain()  # as fast as sshd takes it; the idle timeout bounds a stall
            except ConnectionError:
                outcome.update(side="service", code=NORMAL, reason="sshd closed the connection")
                return

    async def service_to_client() -> None:
        while True:
            try:
                chunk = await reader.read(CHUNK)
            except ConnectionError:
                chunk = b""
            if not chunk:
                outcome.update(side="service", code=NORMAL, reason="sshd closed the connection")
                return
            last[0] = loop.time()
            try:
                await websocket.send_bytes(chunk)
            except Exception:  # the client is gone mid-send
                outcome.update(side="client", code=INTERNAL, reason="")
                return

    await pump_until_done(
        relay,
        [client_to_service, service_to_client],
        idle_timeout=config.idle_timeout,
        last=last,
        outcome=outcome,
        silent="bytes",
    )
    if outcome.get("side") != "client":
        reason = str(outcome.get("reason") or "").encode()[:120].decode(errors="ignore")
        with contextlib.suppress(Exception):
            await websocket.close(code=int(outcome.get("code") or INTERNAL), reason=reason)
