"""A small real HTTP server that answers like a Determined/pedl master with canned JSON.

It records every request; routes are exact (method, path) pairs; tokens are checked like the master."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from pedl.cli.auth_store import salt_and_hash
from tests.support.quiet_http import QuietHTTPServer


@dataclass
class Recorded:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    def q(self, key: str) -> str | None:
        values = self.query.get(key)
        return values[-1] if values else None


@dataclass
class NDJSON:
    """A streamed answer: one `{"result": ...}` line per item, with an optional pause between."""

    items: list[Any]
    pause: float = 0.0
    raw_lines: list[str] = field(default_factory=list)


Reply = tuple[int, Any] | NDJSON | Any
Handler = Callable[[Recorded], Reply]


class FakeMaster:
    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[Recorded] = []
        self.passwords: dict[str, str] = {"determined": "", "admin": ""}
        self.tokens: dict[str, str] = {}  # token -> username
        self._server = QuietHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self.route("POST", "/api/v1/auth/login", self._login)
        self.route("POST", "/api/v1/auth/logout", lambda r: {})
        self.route("GET", "/api/v1/me", self._me)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeMaster:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def route(self, method: str, path: str, reply: Handler | Any) -> None:
        self.routes[(method, path)] = reply if callable(reply) else (lambda _r, v=reply: v)

    def sequence(self, method: str, path: str, replies: list[Any]) -> None:
        """Answer with each reply in turn, then keep repeating the last one."""
        left = list(replies)

        def next_reply(_r: Recorded) -> Any:
            return left.pop(0) if len(left) > 1 else left[0]

        self.route(method, path, next_reply)

    def calls(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    def issue_token(self, username: str) -> str:
        token = f"tok-{username}-{len(self.tokens)}"
        self.tokens[token] = username
        return token

    # -- built-in routes ------------------------------------------------------------------

    def _login(self, req: Recorded) -> Reply:
        body = req.json or {}
        user = body.get("username")
        if user not in self.passwords or body.get("password") != salt_and_hash(self.passwords[user]):
            return 401, {"message": "invalid credentials", "error": {"error": "invalid credentials"}}
        return {"token": self.issue_token(user), "user": self.user(user)}

    def _me(self, req: Recorded) -> Reply:
        return {"user": self.user(self.caller(req) or "")}

    def user(self, username: str) -> dict[str, Any]:
        return {
            "id": sorted(self.passwords).index(username) + 1 if username in self.passwords else 99,
            "username": username,
            "admin": username == "admin",
            "active": True,
        }

    def caller(self, req: Recorded) -> str | None:
        scheme, _, token = req.headers.get("authorization", "").partition(" ")
        return self.tokens.get(token) if scheme == "Bearer" else None

    # -- HTTP plumbing ---------------------------------------------------------------------

    def _dispatch(self, req: Recorded) -> Reply:
        self.requests.append(req)
        if req.path not in ("/info", "/api/v1/auth/login", "/api/v1/master") and self.caller(req) is None:
            return 401, {"message": "unauthenticated", "code": "unauthenticated"}
        handler = self.routes.get((req.method, req.path))
        if handler is None:
            return 404, {"code": "not_found", "message": f"no route {req.method} {req.path}"}
        return handler(req)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        master = self

        class Handler(BaseHTTPRequestHandler):
            disable_nagle_algorithm = True  # headers and body go out as separate writes

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                parts = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                req = Recorded(
                    self.command,
                    parts.path,
                    parse_qs(parts.query),
                    {k.lower(): v for k, v in self.headers.items()},
                    body,
                )
                reply = master._dispatch(req)
                if isinstance(reply, NDJSON):
                    self._stream(reply)
                    return
                status, payload = reply if isinstance(reply, tuple) else (200, reply)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, reply: NDJSON) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Connection", "close")
                self.end_headers()
                lines = reply.raw_lines or [json.dumps({"result": i}) for i in reply.items]
                for line in lines:
                    self.wfile.write((line + "\n").encode())
                    self.wfile.flush()
                    if reply.pause:
                        time.sleep(reply.pause)

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        return Handler


def experiment(exp_id: int = 1, state: str = "STATE_ACTIVE", **extra: Any) -> dict[str, Any]:
    """An experiment object with every field det requires."""
    return {
        "id": exp_id,
        "name": f"exp-{exp_id}",
        "state": state,
        "archived": False,
        "config": {"searcher": {"name": "single", "metric": "loss"}},
        "jobId": f"job-{exp_id}",
        "numTrials": 1,
        "originalConfig": "",
        "projectId": 1,
        "projectOwnerId": 1,
        "searcherType": "single",
        "startTime": "2025-01-02T03:04:05.123456789Z",
        "username": "determined",
        **extra,
    }


def trial(trial_id: int = 1, exp_id: int = 1, state: str = "STATE_ACTIVE", **extra: Any) -> dict[str, Any]:
    return {
        "id": trial_id,
        "experimentId": exp_id,
        "hparams": {"lr": 0.1},
        "restarts": 0,
        "startTime": "2025-01-02T03:04:05Z",
        "state": state,
        "totalBatchesProcessed": 10,
        **extra,
    }


def log(log_id: int, message: str, trial_id: int = 1) -> dict[str, Any]:
    return {
        "id": str(log_id),
        "level": "LOG_LEVEL_INFO",
        "message": message + "\n",
        "timestamp": "2025-01-02T03:04:05Z",
        "trialId": trial_id,
    }


def page(key: str, items: list[Any]) -> dict[str, Any]:
    n = len(items)
    return {key: items, "pagination": {"offset": 0, "limit": n, "startIndex": 0, "endIndex": n, "total": n}}
