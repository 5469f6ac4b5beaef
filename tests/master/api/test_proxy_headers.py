"""Which headers cross the master's proxy (api/proxy_headers.py)."""

from __future__ import annotations

from pedl.master.api.proxy_headers import header_bytes, request_headers, response_headers, subprotocols


def test_request_drops_hop_by_hop_credentials_and_named_headers() -> None:
    got = request_headers(
        [
            ("Host", "master:8080"),
            ("Connection", "keep-alive, X-Private"),
            ("X-Private", "1"),
            ("Keep-Alive", "5"),
            ("TE", "trailers"),
            ("Transfer-Encoding", "chunked"),
            ("Authorization", "Bearer user-token"),
            ("Grpc-Metadata-x-allocation-token", "Bearer t"),
            ("X-CSRF-Token", "c"),
            ("X-Forwarded-For", "6.6.6.6"),
            ("Accept", "text/html"),
            ("Content-Length", "3"),
        ],
        client="10.0.0.5",
        scheme="https",
    )
    assert got == [
        ("host", "master:8080"),
        ("accept", "text/html"),
        ("content-length", "3"),
        ("x-forwarded-for", "10.0.0.5"),
        ("x-forwarded-proto", "https"),
        ("x-forwarded-host", "master:8080"),
    ]


def test_request_keeps_the_services_cookies_only() -> None:
    got = dict(
        request_headers(
            [("Cookie", "pedl_session=tok; _xsrf=abc; pedl_csrf=c; username-x=1")], client="c", scheme="http"
        )
    )
    assert got["cookie"] == "_xsrf=abc; username-x=1"
    assert "cookie" not in dict(request_headers([("Cookie", "pedl_session=tok")], client="c", scheme="http"))


def test_websocket_handshake_headers_are_left_to_the_client_library() -> None:
    got = dict(
        request_headers(
            [
                ("Host", "m"),
                ("Sec-WebSocket-Key", "k"),
                ("Sec-WebSocket-Version", "13"),
                ("Sec-WebSocket-Protocol", "v1.kernel.websocket.jupyter.org"),
                ("Upgrade", "websocket"),
                ("Origin", "http://m"),
            ],
            client="c",
            scheme="http",
            websocket=True,
        )
    )
    assert set(got) == {"origin", "x-forwarded-for", "x-forwarded-proto", "x-forwarded-host"}


def test_response_drops_hop_by_hop_and_pedls_cookies() -> None:
    got = response_headers(
        [
            ("Connection", "close, X-Hop"),
            ("X-Hop", "1"),
            ("Transfer-Encoding", "chunked"),
            ("Content-Type", "text/html"),
            ("Set-Cookie", "pedl_session=evil; Path=/"),
            ("Set-Cookie", " pedl_csrf=x"),
            ("Set-Cookie", "_xsrf=ok; Path=/proxy/t/"),
            ("Content-Encoding", "gzip"),
        ]
    )
    assert got == [
        ("content-type", "text/html"),
        ("set-cookie", "_xsrf=ok; Path=/proxy/t/"),
        ("content-encoding", "gzip"),
    ]


def test_sizes_and_subprotocols() -> None:
    assert header_bytes([("a", "bc")]) == 7
    assert subprotocols([("Sec-WebSocket-Protocol", "a, b"), ("sec-websocket-protocol", "c")]) == ["a", "b", "c"]
