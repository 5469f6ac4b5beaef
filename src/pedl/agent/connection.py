"""The agent's WebSocket to the master: URL, headers, typed send/receive, and reconnect backoff.

A refusal (close 4401, a version mismatch 4426, or a 401/403 handshake answer) becomes `AgentRefused`;
retrying cannot help.
"""

from __future__ import annotations

import logging
import random
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from pedl.agent.options import TOKEN_ENV, TOKEN_WHERE
from pedl.common.agent_protocol import (
    CLOSE_UNAUTHORIZED,
    CLOSE_VERSION_MISMATCH,
    CREDENTIAL_HEADER,
    MASTER_MESSAGE,
    TOKEN_HEADER,
    MasterMessage,
)
from pedl.common.master_trust import tls_failure, tls_failure_message

log = logging.getLogger(__name__)

AGENTS_WS_PATH = "/agents/ws"
PACKAGE_PATH = "/api/v1/pedl/package"  # the master's own wheel (master/api/package.py)
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # start_task carries the full experiment config
OPEN_TIMEOUT_S = 10.0


class AgentRefused(Exception):
    """The master refused this agent (bad or missing token); the agent stops."""


def ws_url(master_url: str) -> str:
    """http://host:port[/prefix] -> ws://host:port[/prefix]/agents/ws (https -> wss)."""
    parts = urlsplit(master_url.rstrip("/"))
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"master URL must start with http:// or https://, got {master_url!r}")
    return urlunsplit((scheme, parts.netloc, parts.path + AGENTS_WS_PATH, "", ""))


def open_connection(
    master_url: str, token: str | None, ssl_context: ssl.SSLContext | None = None, credential: str | None = None
) -> connect:
    """An awaitable / async context manager that opens the socket (no automatic reconnects), presenting
    the agent's credential and the enrollment secret `token` (which registers an id that has no credential).
    `ssl_context` verifies a wss:// master (None: the system's CAs); ws:// takes none."""
    headers = {TOKEN_HEADER: token} if token else {}
    if credential:
        headers[CREDENTIAL_HEADER] = credential
    url = ws_url(master_url)
    tls: dict[str, Any] = {"ssl": ssl_context} if ssl_context is not None and url.startswith("wss://") else {}
    return connect(url, additional_headers=headers, open_timeout=OPEN_TIMEOUT_S, max_size=MAX_MESSAGE_BYTES, **tls)


CREDENTIAL_REASONS = ("credential of its own", "wrong credential")  # the master's close reasons about credentials


def refusal(exc: BaseException, agent_id: str = "ID", credential_path: Path | None = None) -> AgentRefused | None:
    """The `AgentRefused` that `exc` means, if it means one."""
    hint = f"pass the right one with --token-file or {TOKEN_ENV}: {TOKEN_WHERE}"
    if (
        isinstance(exc, ConnectionClosed)
        and exc.rcvd
        and exc.rcvd.code == CLOSE_UNAUTHORIZED
        and any(r in exc.rcvd.reason for r in CREDENTIAL_REASONS)
    ):
        where = f" ({credential_path})" if credential_path is not None else ""
        return AgentRefused(
            f"the master refused this agent (close {exc.rcvd.code}: {exc.rcvd.reason}): the master issued agent id "
            f"{agent_id} a credential of its own, which this agent's work dir{where} does not hold. If that file "
            f"was lost, an admin runs `pedl agent forget {agent_id}`; the agent token then registers this id again"
        )
    if isinstance(exc, ConnectionClosed) and exc.rcvd and exc.rcvd.code == CLOSE_VERSION_MISMATCH:
        return AgentRefused(
            f"the master refused this agent: its version differs ({exc.rcvd.reason}); run the "
            f"master's version on this host: `pip install pedl==VERSION`, or the wheel the master "
            f"serves at {PACKAGE_PATH} (with a login, or the agent token in {TOKEN_HEADER})"
        )
    if isinstance(exc, ConnectionClosed) and exc.rcvd and exc.rcvd.code == CLOSE_UNAUTHORIZED:
        return AgentRefused(
            f"the master refused this agent (close {exc.rcvd.code}: {exc.rcvd.reason or 'unauthorized'}); {hint}"
        )
    # a server that closes before accepting the upgrade (Starlette does) answers with a plain HTTP
    # status instead, and its reason is lost on the way
    if isinstance(exc, InvalidStatus) and exc.response.status_code in (401, 403):
        return AgentRefused(
            f"the master refused this agent (HTTP {exc.response.status_code}: missing or wrong agent token); {hint}"
        )
    return None


def tls_refusal(exc: BaseException, master_url: str, cert: Path | None) -> AgentRefused | None:
    """The `AgentRefused` for a master whose TLS certificate this agent cannot verify; None for any
    other failure."""
    if not isinstance(tls_failure(exc), ssl.SSLCertVerificationError):
        return None  # other handshake failures (a master restarting mid-handshake) may pass
    message = tls_failure_message(exc, ws_url(master_url), cert, hint="--cert FILE or PEDL_MASTER_CERT")
    return AgentRefused(f"the agent refuses the master: {message}")


async def send_message(ws: ClientConnection, msg: BaseModel) -> None:
    await ws.send(msg.model_dump_json())


async def receive_message(ws: ClientConnection) -> MasterMessage | None:
    """The next message from the master; None (logged) for one this agent cannot read."""
    raw = await ws.recv()
    try:
        return MASTER_MESSAGE.validate_json(raw)
    except ValidationError as exc:
        # a newer master may send types we do not know yet; skipping keeps the agent useful
        log.warning("ignoring a message from the master that does not parse: %s", exc)
        return None


def local_address(ws: ClientConnection) -> str:
    """The interface on which the master (and peers) reach this agent: the local end of the socket."""
    try:
        return str(ws.local_address[0])
    except (TypeError, IndexError, AttributeError):
        return ""


def describe_failure(exc: BaseException) -> str:
    """A connection failure for the agent's log: its type, and its text when it has one."""
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Backoff:
    """Reconnect delays: 0.5 s doubling to a 10 s cap, each with +-25% jitter."""

    def __init__(self, first: float = 0.5, cap: float = 10.0) -> None:
        self._first = first
        self._cap = cap
        self._next = first
        self.attempts = 0

    def next_delay(self) -> float:
        self.attempts += 1
        delay = self._next
        self._next = min(self._next * 2, self._cap)
        # jitter spreads a fleet of agents that lost the same master
        return min(self._cap, delay * random.uniform(0.75, 1.25))

    def reset(self) -> None:
        self._next = self._first
        self.attempts = 0
