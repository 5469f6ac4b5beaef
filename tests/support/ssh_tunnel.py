"""ssh's ProxyCommand for tests: the bytes of stdin and stdout carried in binary WebSocket messages to
and from /proxy/{task_id}/ on a master, as det's `python -m determined.cli.tunnel` does, optionally
with a login token (det's tunnel sends none).

    python -m tests.support.ssh_tunnel WS_URL [TOKEN]

A refused handshake exits 1 with the status on stderr."""

from __future__ import annotations

import os
import sys
import threading

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import ClientConnection, connect


def main(argv: list[str]) -> int:
    url, token = argv[0], (argv[1] if len(argv) > 1 else "")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with connect(url, additional_headers=headers, max_size=None, compression=None, proxy=None) as ws:
            threading.Thread(target=_upstream, args=(ws,), daemon=True).start()
            try:
                for message in ws:
                    os.write(1, message if isinstance(message, bytes) else message.encode())
            except ConnectionClosed:
                pass
    except InvalidStatus as exc:
        print(f"tunnel refused: HTTP {exc.response.status_code}", file=sys.stderr)
        return 1
    return 0


def _upstream(ws: ClientConnection) -> None:
    try:
        while data := os.read(0, 65536):
            ws.send(data)
    except (ConnectionClosed, OSError):
        pass
    ws.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
