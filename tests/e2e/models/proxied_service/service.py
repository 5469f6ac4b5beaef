"""A tiny HTTP + WebSocket service behind the master's proxy (a raw ASGI app on uvicorn): GET echoes
what it got, POST counts and hashes the streamed body, /ws echoes text and binary messages and
closes with the code it is sent as "close:CODE". As a trial it listens on a free port and registers
that port with the master (POST /api/v1/allocations/{id}/proxy_port), then serves until killed."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
import urllib.request

import uvicorn

RECEIVED = {"bytes": 0}  # the POST body's bytes received so far (tests read it in-process)
GATE = threading.Event()  # a response body waits for it between its two halves, when asked to


async def app(scope, receive, send):  # an ASGI app
    if scope["type"] == "websocket":
        await _echo(scope, receive, send)
        return
    path = scope["path"]
    if scope["method"] == "POST":
        digest, RECEIVED["bytes"] = hashlib.sha256(), 0
        while True:
            message = await receive()
            digest.update(message.get("body", b""))
            RECEIVED["bytes"] += len(message.get("body", b""))
            if not message.get("more_body"):
                break
        await _json(send, {"bytes": RECEIVED["bytes"], "sha256": digest.hexdigest()})
        return
    if path.endswith("/halves"):  # the first half, then (after GATE) the second
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b"first-half;", "more_body": True})
        import asyncio

        await asyncio.to_thread(GATE.wait, 60)
        await send({"type": "http.response.body", "body": b"second-half", "more_body": False})
        return
    headers = {k.decode(): v.decode() for k, v in scope["headers"]}
    await _json(
        send,
        {
            "path": path,
            "raw_path": scope.get("raw_path", b"").decode(),
            "query": scope["query_string"].decode(),
            "headers": headers,
        },
        extra=[
            (b"set-cookie", b"pedl_session=stolen; Path=/"),
            (b"set-cookie", b"svc=1; Path=/"),
            (b"connection", b"x-secret"),
            (b"x-secret", b"hop"),
        ],
    )


async def _json(send, body: dict, extra: list | None = None) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *(extra or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


async def _echo(scope, receive, send) -> None:
    await receive()  # websocket.connect
    offered = scope.get("subprotocols") or []
    await send({"type": "websocket.accept", "subprotocol": "echo.v1" if "echo.v1" in offered else None})
    while True:
        message = await receive()
        if message["type"] == "websocket.disconnect":
            return
        text = message.get("text")
        if text is not None and text.startswith("close:"):
            await send({"type": "websocket.close", "code": int(text.split(":")[1]), "reason": "asked to"})
            return
        if text is not None:
            await send({"type": "websocket.send", "text": text})
        else:
            await send({"type": "websocket.send", "bytes": message.get("bytes")})


def listen(host: str = "0.0.0.0") -> tuple[socket.socket, int]:
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock, sock.getsockname()[1]


def server(sock: socket.socket) -> uvicorn.Server:
    return uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))


def register(port: int) -> None:
    master, alloc, token = os.environ["DET_MASTER"], os.environ["DET_ALLOCATION_ID"], os.environ["DET_SESSION_TOKEN"]
    req = urllib.request.Request(
        f"{master.rstrip('/')}/api/v1/allocations/{alloc}/proxy_port",
        data=json.dumps({"port": port}).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}"},
    )
    urllib.request.urlopen(req, timeout=30).read()


def serve_in_thread(sock: socket.socket) -> tuple[uvicorn.Server, threading.Thread]:
    srv = server(sock)
    thread = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not srv.started:
        if not thread.is_alive():
            raise RuntimeError("the service's server ended before it started")
        time.sleep(0.05)
    return srv, thread


if __name__ == "__main__":
    sock, port = listen()
    srv, thread = serve_in_thread(sock)
    register(port)  # once it listens
    print(f"serving on port {port}", flush=True)
    thread.join()
