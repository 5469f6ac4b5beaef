"""An EC2 fault proxy: a tiny HTTP server in the test process that sits between the master and
moto. It forwards every request to moto unchanged (httpx), except the EC2 Actions it was told to
fail: those get an EC2 error response (HTTP 400 or 503 and EC2's XML error body) a given number
of times, or until cleared. It records (time, action) of every call, so that a test can count
RunInstances attempts and a benchmark can timestamp the first one.

    proxy = EC2FaultProxy(moto_url).start()
    provider: {type: aws, endpoint_url: proxy.url, ...}
    proxy.fail("RunInstances", "InstanceLimitExceeded", "You have requested more instances ...")
    ...
    proxy.clear("RunInstances")
    proxy.count("RunInstances")

Times are `time.monotonic()` of this process, taken when the request arrived, before it is
forwarded (or answered with the injected error)."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs
from xml.sax.saxutils import escape

import httpx

from tests.support.quiet_http import QuietHTTPServer

# headers that belong to one hop, or that httpx sets again from what it sends
_HOP_HEADERS = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "te",
        "trailer",
        "upgrade",
        "content-length",
        "accept-encoding",
        "content-encoding",
    }
)


@dataclass(frozen=True)
class Call:
    t: float  # time.monotonic() when the request arrived
    action: str  # the EC2 Action ("" for a request without one)
    error: str | None = None  # the injected error code, if the proxy answered instead of moto
    status: int = 0  # the HTTP status sent back
    params: dict[str, str] = field(default_factory=dict, compare=False, repr=False)  # the form, first values

    def filters(self) -> dict[str, list[str]]:
        """The request's `Filter.N.Name` / `Filter.N.Value.M` pairs as {name: values}."""
        out: dict[str, list[str]] = {}
        n = 1
        while f"Filter.{n}.Name" in self.params:
            out[self.params[f"Filter.{n}.Name"]] = [
                v for k, v in sorted(self.params.items()) if k.startswith(f"Filter.{n}.Value.")
            ]
            n += 1
        return out


@dataclass
class Fault:
    code: str
    message: str
    status: int = 400
    times: int | None = None  # None: until cleared
    used: int = 0


def ec2_error_xml(code: str, message: str, request_id: str | None = None) -> bytes:
    """EC2's error body (the Query protocol's `<Response><Errors>` form, which botocore parses)."""
    rid = request_id or str(uuid.uuid4())
    return (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{escape(code)}</Code>'
        f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{rid}</RequestID></Response>"
    ).encode()


def ec2_params(body: bytes, query: str = "") -> dict[str, str]:
    """The parameters of an EC2 Query-protocol request (form body, else the URL's query), first
    value of each; `Action` names the call."""
    for source in (body.decode("utf-8", "replace"), query):
        params = {k: v[0] for k, v in parse_qs(source).items() if v}
        if "Action" in params:
            return params
    return {}


class EC2FaultProxy:
    def __init__(self, target: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.target = target.rstrip("/")
        self._bind = (host, port)
        self._faults: dict[str, Fault] = {}
        self._calls: list[Call] = []
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._client = httpx.Client(timeout=60.0)
        self._server: QuietHTTPServer | None = None
        self.url = ""

    # -- what tests use ------------------------------------------------------------------------

    def fail(self, action: str, code: str, message: str = "", *, status: int = 400, times: int | None = None) -> None:
        """Answer `action` with this EC2 error `times` times (None: until `clear`)."""
        with self._lock:
            self._faults[action] = Fault(code, message or f"injected by the test: {code}", status, times)

    def clear(self, action: str | None = None) -> None:
        """Stop failing `action` (None: every action)."""
        with self._lock:
            if action is None:
                self._faults.clear()
            else:
                self._faults.pop(action, None)

    def calls(self, action: str | None = None, since: float | None = None) -> list[Call]:
        with self._lock:
            return [
                c for c in self._calls if (action is None or c.action == action) and (since is None or c.t >= since)
            ]

    def count(self, action: str, since: float | None = None, until: float | None = None) -> int:
        return len([c for c in self.calls(action, since) if until is None or c.t <= until])

    def failed(self, action: str) -> int:
        """How many `action` calls got an injected error."""
        return len([c for c in self.calls(action) if c.error])

    def reset(self) -> None:
        """Forget faults and recorded calls (between tests)."""
        with self._lock:
            self._faults.clear()
            self._calls.clear()

    def wait_call(self, action: str, since: float, timeout: float) -> Call:
        """Block until an `action` call arrives at or after `since` (monotonic); return the first."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for c in self._calls:
                    if c.action == action and c.t >= since:
                        return c
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"no {action} call within {timeout:g}s")
                self._cond.wait(left)

    # -- serving -------------------------------------------------------------------------------

    def start(self) -> EC2FaultProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as botocore's connection pool expects
            # headers and body go out in two writes: without TCP_NODELAY, Nagle's algorithm and the
            # client's delayed ACK hold the body back ~40 ms on every call
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                proxy._serve(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

        server = QuietHTTPServer(self._bind, Handler)
        server.daemon_threads = True
        self._server = server
        threading.Thread(target=server.serve_forever, name="ec2-fault-proxy", daemon=True).start()
        self.url = f"http://{self._bind[0]}:{server.server_port}"
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        self._client.close()

    def __enter__(self) -> EC2FaultProxy:
        return self.start() if self._server is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _record(self, call: Call) -> None:
        with self._cond:
            self._calls.append(call)
            self._cond.notify_all()

    def _take_fault(self, action: str) -> Fault | None:
        with self._lock:
            fault = self._faults.get(action)
            if fault is None:
                return None
            fault.used += 1
            if fault.times is not None and fault.used >= fault.times:
                del self._faults[action]
            return fault

    def _serve(self, h: BaseHTTPRequestHandler) -> None:
        arrived = time.monotonic()
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        query = h.path.partition("?")[2]
        params = ec2_params(body, query)
        action = params.get("Action", "")
        fault = self._take_fault(action) if action else None
        if fault is not None:
            self._record(Call(arrived, action, fault.code, fault.status, params))
            self._reply(
                h, fault.status, {"Content-Type": "text/xml;charset=UTF-8"}, ec2_error_xml(fault.code, fault.message)
            )
            return
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP_HEADERS}
        try:
            r = self._client.request(h.command, self.target + h.path, headers=headers, content=body)
        except httpx.HTTPError as exc:  # moto is down: what an unreachable endpoint looks like, a 502
            self._record(Call(arrived, action, "ProxyUpstreamError", 502, params))
            self._reply(h, 502, {"Content-Type": "text/plain"}, f"proxy: moto did not answer: {exc}".encode())
            return
        self._record(Call(arrived, action, None, r.status_code, params))
        out = {k: v for k, v in r.headers.items() if k.lower() not in _HOP_HEADERS}
        self._reply(h, r.status_code, out, b"" if h.command == "HEAD" else r.content)

    @staticmethod
    def _reply(h: BaseHTTPRequestHandler, status: int, headers: dict[str, str], data: bytes) -> None:
        h.send_response(status)
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        if data:
            h.wfile.write(data)
