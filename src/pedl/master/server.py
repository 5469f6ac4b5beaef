"""Run the master: `pedl master run` calls run_master, which serves the app with uvicorn (HTTPS and
WSS with security.tls) and says where it listens, and that it stopped and why."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import gc
import logging
import os
import resource
import shutil
import signal
import socket
import ssl
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any, TypedDict

import uvicorn

from pedl.config.master_config import MasterConfig
from pedl.config.server_config import ServerConfig
from pedl.errors import PedlError
from pedl.master.http_protocol import ConnectionCaps, MasterHttpProtocol

log = logging.getLogger("pedl.master")

STARTUP_FAILURE = 3  # uvicorn.run's exit status when the app never started serving
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
NOFILE_WITHOUT_HARD_LIMIT = 1 << 20  # Linux's default fs.nr_open: the most a soft limit may be
FILES_KEPT_BACK = 256  # at least, of the open-file limit, for what is not a client's connection
MIN_CONNECTIONS = 16
CONSOLE_SOCKET = "console.sock"  # in data_dir
MAX_SOCKET_PATH = 107  # bytes of a Unix socket's path (sun_path, less its NUL)


# allocations (net, of objects the collector tracks) between two young collections; Python's default is 700
YOUNG_COLLECTION_EVERY = 50_000
# seconds a running thread keeps the GIL while another waits for it; Python's default is 0.005
SWITCH_INTERVAL = 0.001


def tune_runtime() -> None:
    """The interpreter for a master that has started, so that API requests wait little while a
    scheduling pass runs in a worker thread (benchmarks/scheduling_pass.py measured each, on a large
    pass, both databases, a 2-core machine):
    - what the master holds by then (FastAPI's routes, pydantic's schemas, SQLAlchemy's mappers and
      statement caches, the config) lives as long as the process, and a full collection scans
      all of it, every thread stopped: 150-390 ms each, two to four in a large pass. Frozen (the
      permanent generation), full collections skip it: ~30 ms, and rare;
    - at 700 allocations a collection, a large pass makes ~530 young collections, and what lives for a
      batch (rows, messages) is scanned again and again as it ages: 120 ms of a pass; 12-43 ms at
      YOUNG_COLLECTION_EVERY, in pauses of 4-14 ms. Garbage in reference cycles lives a little longer;
      reference counting frees the rest at once;
    - a request thread woken by its I/O waits for the GIL until the pass thread's interval ends:
      several times 5 ms per request. At SWITCH_INTERVAL the longest GET /api/v1/me during a large
      pass on PostgreSQL takes 22 ms, against 45-50 ms at Python's default; the pass takes as long."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *gc.get_threshold()[1:])
    gc.enable()  # `pedl master run` starts with it off (cli/master.py)
    sys.setswitchinterval(SWITCH_INTERVAL)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("alembic").setLevel(logging.WARNING)


def listen_url(host: str, port: int, scheme: str = "http") -> str:
    return f"{scheme}://[{host}]:{port}" if ":" in host else f"{scheme}://{host}:{port}"


def bind_console_socket(path: Path) -> socket.socket:
    """A listening Unix socket at `path`, of mode 0600 before anyone could connect: bound in a private
    directory (through /proc/self/fd, so that its long path fits a socket address), then renamed into
    place. A stale socket of an earlier run is replaced; any other file at `path` is an OSError."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise OSError(errno.ENAMETOOLONG, f"longer than a socket address may be ({MAX_SOCKET_PATH} bytes)")
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            raise OSError(errno.EEXIST, "a file that is not a socket is in the way")
    staging = tempfile.mkdtemp(prefix=".console-", dir=path.parent)  # mode 0700
    directory = os.open(staging, os.O_RDONLY | os.O_DIRECTORY)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"/proc/self/fd/{directory}/console.sock")
        os.chmod(os.path.join(staging, "console.sock"), 0o600)
        os.rename(os.path.join(staging, "console.sock"), path)
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    finally:
        os.close(directory)
        shutil.rmtree(staging, ignore_errors=True)
    return sock


class MasterServer(uvicorn.Server):
    """uvicorn's server, plus the console socket, the log lines an operator needs, and a clean exit on
    SIGINT/SIGTERM."""

    def __init__(self, config: uvicorn.Config, console: Path | None = None) -> None:
        super().__init__(config)
        self.stop_signal: str | None = None
        self.console = console
        self._console_inode: int | None = None

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
        if self.console is not None:
            await self._serve_console(self.console)

    async def _serve_console(self, path: Path) -> None:
        """The same app on data_dir/console.sock, which only the master's own OS user (and root) can open:
        logins through it are never held up by others' failed logins (`pedl user login --console PATH`)."""
        try:
            sock = bind_console_socket(path)
        except OSError as exc:
            log.warning("no console socket at %s: %s", path, exc.strerror or exc)
            return
        self._console_inode = os.lstat(path).st_ino
        config, state = self.config, self.server_state
        protocol_class = config.http_protocol_class  # uvicorn's type says any asyncio.Protocol
        if not issubclass(protocol_class, MasterHttpProtocol):
            raise TypeError(f"the master serves MasterHttpProtocol (server_config), not {protocol_class.__name__}")

        def protocol() -> asyncio.Protocol:
            return protocol_class(config=config, server_state=state, app_state=self.lifespan.state)

        self.servers.append(await asyncio.get_running_loop().create_unix_server(protocol, sock=sock))
        log.info("console socket %s (logins through it are never held up: pedl user login --console %s)", path, path)

    async def shutdown(self, sockets: list | None = None) -> None:
        await super().shutdown(sockets)
        if self.console is not None and self._console_inode is not None:
            with contextlib.suppress(OSError):
                if os.lstat(self.console).st_ino == self._console_inode:  # still ours
                    os.unlink(self.console)

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


class TlsOptions(TypedDict, total=False):
    ssl_certfile: str
    ssl_keyfile: str


def tls_options(config: MasterConfig) -> TlsOptions:
    """uvicorn's certificate options for security.tls (none without it). The files were checked
    when the config was loaded; a file changed since is one error line, not a traceback."""
    cert, key = config.security.tls.cert, config.security.tls.key
    if cert is None or key is None:  # (both or neither: security.tls is not enabled)
        return {}
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key, password=b"")
    except (OSError, ssl.SSLError) as exc:
        log.error("cannot serve TLS with security.tls (cert %s, key %s): %s", cert, key, exc)
        raise SystemExit(1) from None
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def raise_open_file_limit() -> tuple[int, int]:
    """The soft limit on open files raised to the hard one (a service often starts with a soft limit of
    1,024 under a far higher hard one): every connection is a file. Returns (soft, hard) after."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, NOFILE_WITHOUT_HARD_LIMIT)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:
            log.warning("cannot raise the open-file limit from %d to %d: %s", soft, target, exc)
    return soft, hard


def connection_caps(server: ServerConfig, open_files: int) -> tuple[int, int]:
    """(total, per address): the configured caps, lowered to leave a quarter of the open-file limit (at
    least 256 files) to everything else the master opens (its database, the proxy's connections to
    tasks, logs, checkpoints)."""
    room = max(open_files - max(FILES_KEPT_BACK, open_files // 4), MIN_CONNECTIONS)
    total = min(server.max_connections, room)
    return total, min(server.max_connections_per_address, total)


def server_config(config: MasterConfig, app: Any, certificate: TlsOptions) -> uvicorn.Config:
    """uvicorn's settings for the master: its own HTTP protocol (http_protocol.py: read timeouts, header
    bound, connection caps fitted to the open-file limit), and no X-Forwarded-For from anyone (uvicorn
    trusts it from loopback by default); app.py trusts it from security.trusted_proxies only."""
    soft, hard = raise_open_file_limit()
    total, per_address = connection_caps(config.server, soft)
    if total < config.server.max_connections:
        log.warning(
            "the open-file limit is %d (hard limit %d): serving at most %d connections at once, not "
            "server.max_connections (%d); raise the limit (LimitNOFILE= of a systemd unit, ulimit -n) for more",
            soft,
            hard,
            total,
            config.server.max_connections,
        )
    caps = ConnectionCaps(total, per_address, config.security.trusted_proxies)
    return uvicorn.Config(
        app,
        host=config.host,
        port=config.port,
        log_level="warning",
        http=MasterHttpProtocol.bound(config.server, caps),
        proxy_headers=False,
        timeout_keep_alive=config.server.keep_alive_timeout,  # pyright: ignore[reportArgumentType]  # int, says uvicorn: a float works
        ws_ping_interval=20,
        ws_ping_timeout=20,
        timeout_graceful_shutdown=5,
        **certificate,
    )


def run_master(config: MasterConfig) -> None:
    setup_logging(config.log_level)
    certificate = tls_options(config)
    from pedl.master.app import create_app

    try:
        app = create_app(config)
    except PedlError as exc:
        log.error("%s", exc.message)
        raise SystemExit(1) from None
    server = MasterServer(server_config(config, app, certificate), console=config.data_dir / CONSOLE_SOCKET)
    server.run()
    if not server.started:  # uvicorn has logged why (the port is taken, the lifespan failed)
        raise SystemExit(STARTUP_FAILURE)
    log.info("pedl master stopped%s", f" on {server.stop_signal}" if server.stop_signal else "")
