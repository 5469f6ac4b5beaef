"""TLS for tests: a CA and a server certificate for 127.0.0.1 and localhost written to files (made by
pedl.common.tls, as a deploy makes them), another CA that did not sign it, a small HTTPS server, and
a real master serving HTTPS, whose test-side calls trust that CA (one SSL context a master)."""

from __future__ import annotations

import functools
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from pedl.common.master_trust import client_ssl_context
from pedl.common.tls import generate_server_certificate
from pedl.devcluster import Master
from tests.support.quiet_http import QuietHTTPServer


@dataclass(frozen=True)
class TlsFiles:
    ca: Path  # the CA that signed `cert`: what clients pass as --cert
    cert: Path  # the server's chain, for security.tls.cert
    key: Path
    other_ca: Path  # a CA that did not sign `cert`: the wrong one

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.cert, self.key)
        return context


def write_tls_files(directory: Path) -> TlsFiles:
    directory.mkdir(parents=True, exist_ok=True)
    ca, server = generate_server_certificate(dns_names=["localhost"], ip_addresses=["127.0.0.1", "::1"])
    other, _ = generate_server_certificate(dns_names=["localhost"], ca_common_name="some other CA")
    files = TlsFiles(
        ca=directory / "ca.pem",
        cert=directory / "master-cert.pem",
        key=directory / "master-key.pem",
        other_ca=directory / "other-ca.pem",
    )
    files.ca.write_bytes(ca.cert_pem)
    files.cert.write_bytes(server.cert_pem)
    files.key.write_bytes(server.key_pem)
    files.key.chmod(0o600)
    files.other_ca.write_bytes(other.cert_pem)
    return files


@contextmanager
def https_json_server(files: TlsFiles, body: Any) -> Iterator[tuple[str, list[str]]]:
    """An HTTPS server on 127.0.0.1 answering every GET with `body` as JSON; yields its URL and
    the paths it was asked for (a client that refused the certificate asks for none)."""
    paths: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # http.server's naming
            paths.append(self.path)
            raw = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: Any) -> None:
            pass

    class Server(QuietHTTPServer):
        def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
            pass  # clients that refuse the certificate abort the handshake on purpose

    httpd = Server(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.socket = files.server_context().wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", paths
    finally:
        httpd.shutdown()
        httpd.server_close()


class HttpsMaster(Master):
    """devcluster's Master (a real `pedl master run`) serving HTTPS with `tls`'s certificate; the
    test's own calls to it (start, token, api) trust its CA."""

    def __init__(self, work_dir: Path, tls: TlsFiles, config: dict[str, Any] | None = None) -> None:
        config = dict(config or {})
        config["security"] = {**config.get("security", {}), "tls": {"cert": str(tls.cert), "key": str(tls.key)}}
        super().__init__(work_dir, config)
        self.tls = tls

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @functools.cached_property
    def _client_context(self) -> ssl.SSLContext:
        return client_ssl_context(self.tls.ca)

    def _verify(self) -> ssl.SSLContext:
        return self._client_context
