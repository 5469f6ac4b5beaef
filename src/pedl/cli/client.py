"""MasterClient: an HTTP client of the master's /api/v1 API that logs in like `det` and caches tokens.
Server errors come back as pedl.errors types; a master that cannot be reached, or whose TLS
certificate cannot be verified, is `Unavailable`."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from pedl.cli.auth_store import DEFAULT_USER, AuthStore, salt_and_hash
from pedl.common.master_trust import MasterCertError, client_ssl_context, tls_failure_message
from pedl.errors import (
    Forbidden,
    InvalidArgument,
    PedlError,
    Unauthenticated,
    Unavailable,
    error_from_response,
)

DEFAULT_MASTER = "http://localhost:8080"
MASTER_ENV = "PEDL_MASTER"
UPLOAD_CHUNK = 256 * 1024


def normalize_master_url(url: str) -> str:
    """Canonical form, as Determined's client makes it: scheme, host, explicit port, no trailing /.

    `host:port` and bare `host` get `http://` (and port 8080 when none is given)."""
    raw = url.strip()
    scheme, sep, rest = raw.partition("://")
    if sep:
        raw = f"{scheme.lower()}://{rest}"
    if raw.startswith("https://"):
        default_port = 443
    elif raw.startswith("http://"):
        default_port = 80
    elif "://" in raw:
        raise InvalidArgument(f"invalid master URL {url!r}: the scheme must be http or https")
    else:
        raw, default_port = f"http://{raw}", 8080
    parts = urlsplit(raw)
    try:
        port = parts.port or default_port
    except ValueError:
        raise InvalidArgument(f"invalid master URL {url!r}: bad port") from None
    if not parts.hostname:
        raise InvalidArgument(f"invalid master URL {url!r}: no host name")
    if parts.username or parts.password or parts.query or parts.fragment:
        raise InvalidArgument(f"invalid master URL {url!r}: no user name, password, query or fragment allowed")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return urlunsplit((parts.scheme, f"{host}:{port}", parts.path, "", "")).rstrip("/")


def _query_value(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list | tuple):
        return [_query_value(v) for v in value]
    return value


def _query(params: dict[str, Any] | None) -> dict[str, Any]:
    return {k: _query_value(v) for k, v in (params or {}).items() if v is not None}


class MasterClient:
    """One master, one user. The user is `user`, else the master's active user, else `determined`."""

    def __init__(
        self,
        master: str,
        *,
        user: str | None = None,
        store: AuthStore | None = None,
        timeout: float = 30.0,
        cert: str | None = None,
        console: str | None = None,
    ) -> None:
        """`cert`: a CA file to verify an https:// master against instead of the system's CAs. `console`:
        the master's console socket (data_dir/console.sock) to reach it through, on its host; tokens are
        still kept for `master`'s URL."""
        self.url = normalize_master_url(master)
        self.store = store or AuthStore()
        self.timeout = timeout
        self.cert = cert
        self._user = user
        self._token: str | None = None
        verify: Any = True
        if self.url.startswith("https://"):
            try:
                verify = client_ssl_context(cert)
            except MasterCertError as exc:
                raise InvalidArgument(str(exc)) from None
        if console is not None:  # plain HTTP over the socket, whatever the master's URL says
            self._http = httpx.Client(
                base_url="http://pedl-console", timeout=timeout, transport=httpx.HTTPTransport(uds=console)
            )
        else:
            self._http = httpx.Client(base_url=self.url, timeout=timeout, verify=verify)

    def close(self) -> None:
        self._http.close()

    @property
    def username(self) -> str:
        return self._user or self.store.active_user(self.url) or DEFAULT_USER

    # -- authentication -------------------------------------------------------------------

    def login(self, username: str, password: str) -> dict[str, Any]:
        """POST /api/v1/auth/login; caches the token and acts as `username` from now on."""
        body = {"username": username, "password": salt_and_hash(password), "isHashed": True}
        answer = self.request("POST", "/api/v1/auth/login", json=body, auth=False)
        token = answer.get("token") if isinstance(answer, dict) else None
        if not token:
            raise PedlError("the master answered the login without a token")
        self.store.set_token(self.url, username, token)
        self._user, self._token = username, token
        return answer

    def _auto_login(self) -> str:
        user = self.username
        if user != DEFAULT_USER:
            raise Unauthenticated(f"not logged in as {user!r} at {self.url}: run `pedl user login {user}`")
        try:
            self.login(DEFAULT_USER, "")
        except (Unauthenticated, Forbidden) as exc:
            raise Unauthenticated(
                f"automatic login as {DEFAULT_USER!r} failed ({exc.message}): run `pedl user login USERNAME`"
            ) from None
        assert self._token is not None
        return self._token

    def auth_headers(self) -> dict[str, str]:
        if self._token is None:
            self._token = self.store.token(self.url, self.username) or self._auto_login()
        return {"Authorization": f"Bearer {self._token}"}

    def logout(self) -> str:
        """End the cached session of the current user at the master and forget it; returns the user."""
        user = self.username
        token = self.store.token(self.url, user)
        if token is not None:
            try:
                resp = self._send(
                    "POST", "/api/v1/auth/logout", auth=False, headers={"Authorization": f"Bearer {token}"}
                )
                resp.close()
            except Unavailable:
                pass  # the token is forgotten here either way
            self.store.drop_token(self.url, user)
        if self.store.active_user(self.url) == user:
            self.store.set_active_user(self.url, None)
        self._token = None
        return user

    def _renew_after_401(self) -> None:
        """A cached token was refused: log in again once as `determined`, else ask the user to."""
        user = self.username
        self.store.drop_token(self.url, user)
        self._token = None
        if user != DEFAULT_USER:
            raise Unauthenticated(
                f"the session of {user!r} at {self.url} has expired or is invalid: run `pedl user login {user}`"
            )
        self._auto_login()

    # -- requests -------------------------------------------------------------------------

    def _transport_error(self, exc: httpx.TransportError) -> PedlError:
        refused = tls_failure_message(exc, self.url, self.cert)
        if refused is not None:
            return Unavailable(refused)
        if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
            return Unavailable(f"cannot reach the master at {self.url}")
        if isinstance(exc, httpx.TimeoutException):
            return Unavailable(f"the master at {self.url} did not answer in time")
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError) and self.url.startswith("http://"):
            # what a master serving HTTPS does to a plain HTTP request: it hangs up, with a clean close or,
            # when its TLS alert races the request, a reset (seen under load in CI)
            return Unavailable(
                f"the master at {self.url} closed the connection without an answer; "
                "if it serves HTTPS, use an https:// URL"
            )
        return Unavailable(f"lost the connection to the master at {self.url} ({type(exc).__name__})")

    def _send(
        self,
        method: str,
        path: str,
        *,
        auth: bool,
        stream: bool = False,
        params: dict[str, Any] | None = None,
        json_body: Any = None,
        has_body: bool = False,
        raw: bytes | None = None,
        progress: Callable[[int], None] | None = None,
        timeout: Any = None,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        for attempt in (0, 1):
            sent = {**(headers or {}), **(self.auth_headers() if auth else {})}
            kwargs: dict[str, Any] = {"params": _query(params), "headers": sent}
            if raw is not None:
                sent.update({"Content-Type": "application/json", "Content-Length": str(len(raw))})
                kwargs["content"] = _chunks(raw, progress) if progress else raw
            elif has_body:
                kwargs["json"] = json_body
            if timeout is not None:
                kwargs["timeout"] = timeout
            request = self._http.build_request(method, path, **kwargs)
            try:
                resp = self._http.send(request, stream=stream)
            except httpx.TransportError as exc:
                raise self._transport_error(exc) from None
            if resp.status_code == 401 and auth and attempt == 0:
                resp.close()
                self._renew_after_401()
                continue
            return resp
        raise AssertionError("unreachable")

    def _check(self, method: str, path: str, resp: httpx.Response) -> None:
        if 200 <= resp.status_code < 300:
            return
        try:
            body: Any = resp.json()
        except ValueError:
            body = None
        err = error_from_response(resp.status_code, body)
        if not isinstance(body, dict) or err.message == f"HTTP {resp.status_code}":
            err.message = f"{method} {path} failed with HTTP {resp.status_code}"
            err.args = (err.message,)
        raise err

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        json: Any = None,
        auth: bool = True,
        timeout: Any = None,
    ) -> Any:
        """Send a request; with `json=None` no body is sent (as det does for kill/pause/activate)."""
        resp = self._send(
            method, path, auth=auth, params=params, timeout=timeout, json_body=json, has_body=json is not None
        )
        self._check(method, path, resp)
        if not resp.content:
            return {}
        try:
            return resp.json()
        except ValueError:
            raise PedlError(f"{method} {path}: the master's answer is not JSON") from None

    def get(self, path: str, **params: Any) -> Any:
        return self.request("GET", path, params=params)

    def post(self, path: str, body: Any = None) -> Any:
        return self.request("POST", path, json=body)

    def upload(self, path: str, body: bytes, progress: Callable[[int], None] | None = None) -> Any:
        """POST a large, already-encoded JSON body in chunks, calling `progress(bytes_sent)`."""
        timeout = httpx.Timeout(self.timeout, write=None, read=600.0)
        resp = self._send("POST", path, auth=True, raw=body, progress=progress, timeout=timeout)
        self._check("POST", path, resp)
        return resp.json() if resp.content else {}

    def paginate(self, path: str, key: str, params: dict[str, Any] | None = None, page_size: int = 200) -> list[Any]:
        """Follow Determined's `pagination` (offset, endIndex, total) until every item is read."""
        items: list[Any] = []
        offset = 0
        while True:
            body = self.request("GET", path, params={**(params or {}), "offset": offset, "limit": page_size})
            page = body.get(key) or []
            items.extend(page)
            pagination = body.get("pagination") or {}
            end, total = pagination.get("endIndex"), pagination.get("total")
            if not page or end is None or total is None or end >= total or end <= offset:
                return items
            offset = end

    @contextlib.contextmanager
    def open_stream(
        self, path: str, params: dict[str, Any] | None = None, read_timeout: float | None = 300.0
    ) -> Iterator[httpx.Response]:
        """GET an answer that is not JSON (a checkpoint's tar) as a response to read in pieces;
        an error status raises as `request` does, a broken connection as Unavailable."""
        resp = self._send(
            "GET", path, auth=True, stream=True, params=params, timeout=httpx.Timeout(self.timeout, read=read_timeout)
        )
        try:
            if not 200 <= resp.status_code < 300:
                resp.read()
                self._check("GET", path, resp)
            yield resp
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from None
        finally:
            resp.close()

    def stream_ndjson(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Yield each line's `result` of a newline-delimited JSON stream (logs, `follow=true`)."""
        resp = self._send(
            "GET", path, auth=True, stream=True, params=params, timeout=httpx.Timeout(self.timeout, read=None)
        )
        try:
            if not 200 <= resp.status_code < 300:
                resp.read()
                self._check("GET", path, resp)
            for line in resp.iter_lines():
                if not line.strip():
                    continue
                try:
                    item = json.loads(line)
                except ValueError:
                    raise PedlError(f"GET {path}: a line of the stream is not JSON") from None
                if isinstance(item, dict) and item.get("error"):
                    err = item["error"]
                    status = err.get("httpCode", 500) if isinstance(err, dict) else 500
                    raise error_from_response(int(status or 500), err)
                yield item.get("result", item) if isinstance(item, dict) else item
        except httpx.TransportError as exc:
            raise self._transport_error(exc) from None
        finally:
            resp.close()


def _chunks(raw: bytes, progress: Callable[[int], None]) -> Iterator[bytes]:
    for start in range(0, len(raw), UPLOAD_CHUNK):
        chunk = raw[start : start + UPLOAD_CHUNK]
        yield chunk
        progress(len(chunk))
