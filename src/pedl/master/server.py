"""Run the master: `pedl master run` calls run_master, which serves the app with uvicorn (HTTPS and
WSS with security.tls) and says where it listens, and that it stopped and why."""

from __future__ import annotations

import contextlib
import gc
import logging
import signal
import ssl
import sys
import threading
from collections.abc import Iterator
from types import FrameType

import uvicorn

from pedl.config.master_config import MasterConfig
from pedl.errors import PedlError

log = logging.getLogger("pedl.master")

STARTUP_FAILURE = 3  # uvicorn.run's exit status when the app never started serving
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


# allocations (net, of objects the collector tracks) between two young collections; Python's default is 700
YOUNG_COLLECTION_EVERY = 50_000
# seconds a running thread keeps the GIL while another waits for it; Python's default is 0.005
SWITCH_INTERVAL = 0.001


def tune_runtime() -> None:
    """The interpreter for a master that has started, so that API requests wait little while a
    scheduling pass runs in a worker thread (benchmarks/scheduling_pass.py measured each, on a large
    pass, both databases, a 2-core machine):
    - what the master holds by then (FastAPI's routes, pydantic's schemas, SQLAlchemy's mappers and
      statement caches, the config) lives as long as the process, and each full collection scanned
      all of it, every thread stopped: 150-390 ms each, two to four in a large pass. Frozen (the
      permanent generation), full collections skip it: ~30 ms, and they became rare;
    - at 700 allocations a collection, a large pass made ~530 young collections, and what lived for a
      batch (rows, messages) was scanned again and again as it aged: 120 ms of a pass; 12-43 ms at
      YOUNG_COLLECTION_EVERY, in pauses of 4-14 ms. Garbage in reference cycles lives a little longer;
      reference counting frees the rest at once as before;
    - a request thread woken by its I/O waits for the GIL until the pass thread's interval ends:
      several times 5 ms per request. At SWITCH_INTERVAL the longest GET /api/v1/me during a large
      pass on PostgreSQL was 22 ms, 45-50 ms at Python's default; the pass took as long."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    gc.enable()  # `pedl master run` starts with it off (cli/master.py)
    sys.setswitchinterval(SWITCH_INTERVAL)


def setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level.upper()), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)


def listen_url(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


class MasterServer(uvicorn.Server):
    """uvicorn's server, plus the log lines an operator needs, and a clean exit on SIGINT/SIGTERM."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.stop_signal: str | None = None

    async def startup(self, sockets: list | None = None) -> None:
        await super().startup(sockets)
        if not self.started:
            return
        tune_runtime()  # the lifespan has run: what is loaded now stays
        # the bound address, not the configured one: `port: 0` picks a free port
        scheme = "https" if self.config.is_ssl else "http"
        for server in self.servers:
            for sock in server.sockets:
                host, port = sock.getsockname()[:2]
                everywhere = " (all interfaces)" if host in ("0.0.0.0", "::") else ""
                log.info("pedl master listening on %s%s", listen_url(host, port, scheme), everywhere)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signal.Signals(sig).name
            log.info("pedl master stopping on %s", self.stop_signal)
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """uvicorn's, without re-raising the signal once shut down: a requested stop that went well
        ends the process with status 0, not as killed by SIGTERM."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        originals = {sig: signal.signal(sig, self.handle_exit) for sig in STOP_SIGNALS}
        try:
            yield
        finally:
            for sig, handler in originals.items():
                signal.signal(sig, handler)


def tls_options(config: MasterConfig) -> dict[str, str]:
    """uvicorn's certificate options for security.tls (none without it). The files were checked
    when the config was loaded; a file changed since is one error line, not a traceback."""
    tls = config.security.tls
    if not tls.enabled:
        return {}
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(tls.cert, tls.key, password=b"")
    except (OSError, ssl.SSLError) as exc:
        log.error("cannot serve TLS with security.tls (cert %s, key %s): %s", tls.cert, tls.key, exc)
        raise SystemExit(1) from None
    return {"ssl_certfile": str(tls.cert), "ssl_keyfile": str(tls.key)}


def run_master(config: MasterConfig) -> None:
    setup_logging(config.log_level)
    certificate = tls_options(config)
    from pedl.master.app import create_app

    try:
        app = create_app(config)
    except PedlError as exc:
        log.error("%s", exc.message)
        raise SystemExit(1) from None
    server = MasterServer(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                         ws_ping_interval=20, ws_ping_timeout=20, timeout_graceful_shutdown=5,
                                         **certificate))
    server.run()
    if not server.started:  # uvicorn has logged why (the port is taken, the lifespan failed)
        raise SystemExit(STARTUP_FAILURE)
    log.info("pedl master stopped%s", f" on {server.stop_signal}" if server.stop_signal else "")
