"""A threading HTTP server for fake peers in tests that does not print a traceback when a client
hangs up mid-request (tests cut connections on purpose, and the print lands outside any test)."""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer


class QuietHTTPServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)
