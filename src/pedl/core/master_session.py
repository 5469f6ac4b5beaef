"""The task's HTTP session with the master: auth header, JSON bodies, retries while it is away.

Connection errors and 5xx/429 answers are retried with exponential backoff for up to
PEDL_REPORT_RETRY_SECONDS, so reports made while the master restarts arrive later; 4xx answers are
raised at once as pedl errors, and so is a master whose TLS certificate cannot be verified.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

import httpx

try:  # pip installs pedl with orjson; a task image that only carries pedl.core's source may lack it
    import orjson
except ImportError:  # pragma: no cover - the stdlib's json below, slower
    orjson = None

from pedl.common.master_trust import MASTER_CERT_ENV, client_ssl_context, tls_failure, tls_failure_message
from pedl.core.outbox import Outbox
from pedl.errors import PedlError, Unavailable, error_from_response

logger = logging.getLogger("pedl.core")

RETRY_SECONDS_ENV = "PEDL_REPORT_RETRY_SECONDS"
DEFAULT_RETRY_SECONDS = 600.0
TASK_CERT_HINT = f"the agent's --cert FILE (its tasks get it as {MASTER_CERT_ENV})"


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff for calls to the master: `initial_s`, doubling, capped at `max_s`, until `deadline_s`."""

    deadline_s: float = DEFAULT_RETRY_SECONDS
    initial_s: float = 0.5
    max_s: float = 30.0

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RetryPolicy:
        env = os.environ if environ is None else environ
        raw = env.get(RETRY_SECONDS_ENV, "").strip()
        if not raw:
            return cls()
        try:
            seconds = float(raw)
        except ValueError:
            raise ValueError(f"{RETRY_SECONDS_ENV} must be a number of seconds, got {raw!r}") from None
        return cls(deadline_s=max(0.0, seconds))


def _retryable_status(status: int) -> bool:
    return status >= 500 or status == 429


BACKGROUND_QUEUE = 10_000  # reports queued before report calls wait (backpressure)
# a batch the sender coalesces: at most this many reports (the master's metric_batches.MAX_REPORTS)
# and about this many bytes (well inside the master's 4 MiB request body limit)
BATCH_REPORTS = 4000  # (1,000 once; 2,000 gave 0.49 of executemany on SQLite, 4,000 0.53: benchmarks.metric_ingestion)
BATCH_BYTES = 2 * 1024 * 1024
# how long the sender waits for more reports to join a batch (unless BATCH_REPORTS wait, or a call flushes):
# a request costs the training process ~1-2 ms of its interpreter, so a 1 ms step that reports every step
# kept 0.968 of its speed with 0.1 s, 0.987-0.991 with 1 s (benchmarks.harness_overhead)
LINGER_S = 1.0


class _Queued(NamedTuple):  # a tuple: made once per report, on the training loop's thread
    path: str
    body: Any  # or a function of the entry that makes it (a batch entry's single form, made only if sent alone)
    batch_path: str | None = None  # consecutive items with the same batch path go out as one request
    entry: Any = None  # this item's place in that batch's "reports"


class MasterSession:
    """Calls the master's REST API on behalf of one task.

    Calls are serialized: one in flight at a time, retries included, so reports reach the master in
    the order they were made. Use a separate session for long polls.
    """

    def __init__(
        self,
        master_url: str,
        token: str | None,
        *,
        retry: RetryPolicy | None = None,
        timeout_s: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
        cert_file: str | None = None,
    ) -> None:
        """`cert_file`: the CA to verify an https:// master against (None: the system's CAs)."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.master_url = master_url.rstrip("/")
        self.cert_file = cert_file
        self.retry = retry if retry is not None else RetryPolicy.from_env()
        verify = client_ssl_context(cert_file) if self.master_url.startswith("https://") else True
        self._client = httpx.Client(base_url=self.master_url, headers=headers, timeout=timeout_s, verify=verify)
        # Injected so tests can check the backoff schedule without waiting for it.
        self._sleep = sleep
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._closed = False
        # reports that need no answer go out from one background thread, in order, so a training
        # loop does not wait a round trip per report (Determined does the same)
        self._outbox: Outbox[_Queued | None] = Outbox(maxsize=BACKGROUND_QUEUE, linger=LINGER_S)
        self._sender: threading.Thread | None = None
        self._background_error: PedlError | None = None

    def get(
        self, path: str, *, params: Mapping[str, Any] | None = None, timeout_s: float | None = None, retry: bool = True
    ) -> Any:
        return self.request("GET", path, params=params, timeout_s=timeout_s, retry=retry)

    def post(self, path: str, body: Any, *, timeout_s: float | None = None, retry: bool = True) -> Any:
        return self.request("POST", path, body=body, timeout_s=timeout_s, retry=retry)

    def post_in_background(self, path: str, body: Any, *, batch: tuple[str, Any] | None = None) -> None:
        """Queue a POST whose answer nobody reads. Reports keep their order, every synchronous
        call waits for the queue first, and a failure is raised by the next call or `flush()`.

        With `batch` (a batch route's path, this report's entry in it), the reports queued one after
        another with the same batch path when the sender wakes go out as one POST of
        {"reports": [entry, ...]}: everything queued, up to BATCH_REPORTS and about BATCH_BYTES; `body`
        may then be a function that makes the single form from the entry, called only if the report goes
        alone."""
        if self._background_error is not None:
            self._raise_background_error()
        if batch is None:
            json.dumps(body, allow_nan=False)  # a body that cannot be sent fails here, in the caller
        # (a batch entry is JSON already: the sender encodes it, once, off the caller's loop)
        if self._sender is None:
            self._sender = threading.Thread(target=self._send_loop, name="pedl-reports", daemon=True)
            self._sender.start()
        self._outbox.put(_Queued(path, body, *(batch or (None, None))))

    def flush(self) -> None:
        """Wait until every background report has been delivered (or has failed)."""
        if self._sender is not None:
            self._outbox.join()
        self._raise_background_error()

    def _raise_background_error(self) -> None:
        error, self._background_error = self._background_error, None
        if error is not None:
            raise error

    def _send_loop(self) -> None:
        while True:
            item = self._outbox.get()
            try:
                if item is None:
                    return
                if item.batch_path is None:
                    self._send_background(item.path, item.body)
                    continue
                run = [
                    item,
                    *self._outbox.take_while(
                        lambda q, p=item.batch_path: q is not None and q.batch_path == p, BATCH_REPORTS - 1
                    ),
                ]
                for request in _batches(run):
                    if request[0] is not None:  # alone: Determined's single report
                        part = request[0]
                        body = part.body(part.entry) if callable(part.body) else part.body
                        self._send_background(part.path, body)
                    else:
                        self._send_background(item.batch_path, None, b'{"reports":' + request[1] + b"}")
            finally:
                self._outbox.done()

    def _send_background(self, path: str, body: Any, raw: bytes | None = None) -> None:
        """One request of the sender; a failure is kept for the next call to raise."""
        try:
            self.request("POST", path, body=body, _flush=False, _raw=raw)
        except (TypeError, ValueError) as exc:  # a body json cannot encode: nothing to retry
            logger.error("a background report could not be sent: %s", exc)
            if self._background_error is None:
                self._background_error = PedlError(f"POST {path}: cannot send the report: {exc}")
        except PedlError as exc:
            logger.error("a background report failed: %s", exc.message)
            if self._background_error is None:
                self._background_error = exc

    def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, Any] | None = None,
        timeout_s: float | None = None,
        retry: bool = True,
        _flush: bool = True,
        _raw: bytes | None = None,
    ) -> Any:
        """Send one call; return the parsed JSON answer (None for an empty one). `_raw`: the body,
        encoded already (the sender's batches)."""
        if _flush:
            self.flush()  # what was queued before this call reaches the master before it
        content = _raw
        headers = {"Content-Type": "application/json"} if _raw is not None else {}
        if body is not None and _raw is None:
            content = json.dumps(body, allow_nan=False).encode()
            headers["Content-Type"] = "application/json"
        kwargs: dict[str, Any] = {"params": params, "content": content, "headers": headers}
        if timeout_s is not None:
            kwargs["timeout"] = timeout_s
        with self._lock:
            return self._send_with_retries(method, path, kwargs, retry)

    def close(self) -> None:
        if self._sender is not None:
            try:
                self.flush()
            except PedlError as exc:  # already logged by the sender; closing must not hide the exit
                logger.error("closing with an undelivered report: %s", exc.message)
            self._outbox.put(None)
            self._sender.join(timeout=5)
        self._closed = True
        self._client.close()

    def _send_with_retries(self, method: str, path: str, kwargs: dict[str, Any], retry: bool) -> Any:
        policy = self.retry
        start = self._monotonic()
        delay = policy.initial_s
        attempts = 0
        while True:
            attempts += 1
            try:
                response = self._client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                if self._closed:
                    raise Unavailable(f"{method} {path}: session closed") from exc
                if isinstance(tls_failure(exc), ssl.SSLCertVerificationError):
                    # waiting cannot make the certificate trusted
                    untrusted = tls_failure_message(exc, self.master_url, self.cert_file, hint=TASK_CERT_HINT)
                    raise Unavailable(f"{method} {path}: {untrusted}") from None
                failure: PedlError = Unavailable(
                    f"{method} {path}: cannot reach the master at {self.master_url}: {type(exc).__name__}: {exc}"
                )
                cause: BaseException | None = exc
            else:
                if response.is_success:
                    return _parse_body(response)
                error = _error_for(method, path, response)
                if not _retryable_status(response.status_code):
                    raise error
                failure, cause = error, None

            remaining = policy.deadline_s - (self._monotonic() - start)
            if not retry or remaining <= 0:
                if attempts > 1:
                    failure.message = f"{failure.message} (gave up after {attempts} attempts)"
                    failure.args = (failure.message,)
                raise failure from cause
            if attempts == 1 or delay >= policy.max_s:
                logger.warning("%s; retrying for up to %.0f s more", failure.message, remaining)
            self._sleep(min(delay, remaining))
            delay = min(delay * 2, policy.max_s)


def _batches(run: list[_Queued]) -> Iterator[tuple[_Queued, None] | tuple[None, bytes]]:
    """A run of batch entries as requests, in order: (item, None) for one that goes alone (a run of one,
    or an entry JSON cannot say), (None, b"[entry,...]") for a batch of up to about BATCH_BYTES.
    The whole run is encoded in one call where it can be (the common case: plain finite numbers)."""
    if (
        len(run) > 1
        and (whole := _encode([q.entry for q in run], check=False)) is not None
        and len(whole) - len(run) - 1 <= BATCH_BYTES
    ):  # (the entries' own bytes, as below)
        yield None, whole
        return
    held: list[tuple[_Queued, bytes]] = []  # the next batch's items and their JSON
    size = 0
    for q in run:
        part = _encode(q.entry)
        if held and (part is None or size + len(part) > BATCH_BYTES):
            yield _request(held)
            held, size = [], 0
        if part is None:
            yield q, None
        else:
            held.append((q, part))
            size += len(part)
    if held:
        yield _request(held)


def _request(held: list[tuple[_Queued, bytes]]) -> tuple[_Queued, None] | tuple[None, bytes]:
    """One item alone, or the items' JSON as one batch."""
    return (held[0][0], None) if len(held) == 1 else (None, b"[" + b",".join(part for _, part in held) + b"]")


def _encode(entry: Any, *, check: bool = True) -> bytes | None:
    """A batch entry (or a list of them) as JSON; None for one that cannot be (an entry then goes out on
    its own, and fails there as any unsendable body does). `check=False`: None also where a null is
    written (orjson writes NaN and Infinity so; the caller then encodes entry by entry)."""
    try:
        if orjson is None:
            return json.dumps(entry, allow_nan=False, separators=(",", ":")).encode()
        raw = orjson.dumps(entry)
        if b"null" in raw:  # orjson writes NaN and Infinity as null, where JSON has no way to say them
            if not check:
                return None
            json.dumps(entry, allow_nan=False)
        return raw
    except (TypeError, ValueError):  # a type JSON lacks, an integer past 64 bits, a non-finite float
        return None


def _parse_body(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _error_for(method: str, path: str, response: httpx.Response) -> PedlError:
    try:
        body: Any = response.json()
    except ValueError:
        text = response.text.strip()
        body = {"message": text[:500]} if text else None
    error = error_from_response(response.status_code, body)
    message = f"{method} {path} failed with HTTP {response.status_code}: {error.message}"
    return type(error)(message, fields=error.fields)
