"""`pedl shell tunnel ID`, the ssh ProxyCommand of `pedl shell open`: a WebSocket to the master's proxy
at /proxy/{id}/ (with the user's login token), stdin sent as binary messages and what comes back
written to stdout, until either side closes. The protocol of Determined's `determined.cli.tunnel`."""

from __future__ import annotations

import json
import os
import ssl
import threading
from urllib.parse import quote

from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from pedl.errors import Unavailable

CHUNK = 64 * 1024
OPEN_TIMEOUT = 30.0
NORMAL_CLOSE = (1000, 1001)


def tunnel_url(master_url: str, task_id: str) -> str:
    """ws(s)://host:port/proxy/{id}/ of an http(s):// master URL."""
    scheme, _, rest = master_url.partition("://")
    return f"{'wss' if scheme == 'https' else 'ws'}://{rest}/proxy/{quote(task_id, safe='')}/"


def refusal(exc: InvalidStatus) -> str:
    """The master's reason for refusing the WebSocket: its JSON `message`, else the status."""
    response = exc.response
    status = response.status_code
    try:
        body = json.loads(response.body or b"")
        message = body.get("message") if isinstance(body, dict) else None
    except ValueError:
        message = None
    return f"HTTP {status}" + (f": {message}" if message else "")


def open_tunnel(url: str, headers: dict[str, str], ssl_context: ssl.SSLContext | None) -> ClientConnection:
    """The WebSocket, open; a refusal or an unreachable master is Unavailable, saying which."""
    try:
        return connect(
            url,
            additional_headers=headers,
            ssl=ssl_context,
            compression=None,
            max_size=None,
            proxy=None,
            open_timeout=OPEN_TIMEOUT,
        )
    except InvalidStatus as exc:
        raise Unavailable(f"the master refused the tunnel to {url} ({refusal(exc)})") from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        raise Unavailable(f"cannot open a tunnel to {url}: {exc}") from None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _send_input(ws: ClientConnection, stdin_fd: int) -> None:
    """stdin -> binary messages; at its end (ssh is done) the WebSocket is closed."""
    try:
        while chunk := os.read(stdin_fd, CHUNK):
            ws.send(chunk)
    except (ConnectionClosed, OSError):
        pass
    finally:
        ws.close()


def copy(ws: ClientConnection, stdin_fd: int, stdout_fd: int) -> int:
    """Copy both ways until either side closes; 0 after a normal close, else 1 (the reason on stderr
    is for the person running ssh)."""
    sender = threading.Thread(target=_send_input, args=(ws, stdin_fd), daemon=True, name="tunnel-stdin")
    sender.start()
    try:
        for message in ws:
            _write_all(stdout_fd, message if isinstance(message, bytes) else message.encode())
    except ConnectionClosed:
        pass
    except OSError:  # ssh went away
        ws.close()
        return 0
    code = ws.close_code
    if code is None or code in NORMAL_CLOSE:
        return 0
    why = f"{code}: {ws.close_reason}" if ws.close_reason else str(code)
    os.write(2, f"pedl shell tunnel: closed by the master ({why})\n".encode())
    return 1
