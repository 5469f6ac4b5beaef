"""Large JSON answers: gzip only when the client accepts it and the body is large, the dependency's
headers (the ETag) kept, and the same JSON either way."""

from __future__ import annotations

import pytest
from fastapi import FastAPI, Request, Response
from fastapi.testclient import TestClient

from pedl.master.api.json_body import GZIP_MIN_BYTES, accepts_gzip, json_body


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("*", True),
        ("", False),
        ("identity", False),
        ("gzip;q=0", False),
        ("gzip;q=0.0, br", False),
        ("gzip;q=x", False),
        ("GZip", True),
        ("x-gzip", False),
    ],
)
def test_accept_encoding(header: str, expected: bool) -> None:
    assert accepts_gzip(header) is expected


def _client() -> TestClient:
    app = FastAPI()

    @app.get("/big")
    def big(request: Request, response: Response) -> Response:
        response.headers["ETag"] = 'W/"v1"'
        return json_body(request, {"values": [i / 7 for i in range(5_000)]}, response.headers)

    @app.get("/small")
    def small(request: Request) -> Response:
        return json_body(request, {"ok": True})

    return TestClient(app)


def test_a_large_body_is_gzipped_for_a_client_that_accepts_it() -> None:
    client = _client()
    raw = client.get("/big", headers={"Accept-Encoding": "identity"})
    assert raw.headers.get("content-encoding") is None and raw.headers["etag"] == 'W/"v1"'
    assert len(raw.content) >= GZIP_MIN_BYTES
    zipped = client.get("/big", headers={"Accept-Encoding": "gzip"})  # httpx decodes it; the header says it was
    assert zipped.headers["content-encoding"] == "gzip" and zipped.headers["etag"] == 'W/"v1"'
    assert zipped.headers["vary"] == "Accept-Encoding"
    assert zipped.json() == raw.json() == {"values": [i / 7 for i in range(5_000)]}
    assert int(zipped.headers["content-length"]) < len(raw.content) / 2


def test_a_small_body_is_sent_as_is() -> None:
    r = _client().get("/small", headers={"Accept-Encoding": "gzip"})
    assert r.headers.get("content-encoding") is None and r.json() == {"ok": True}
