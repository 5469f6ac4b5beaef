"""MasterClient: URL normalisation, automatic login, 401 handling, errors, pages and streams."""

from __future__ import annotations

import socket

import pytest

from pedl.cli.auth_store import AuthStore
from pedl.cli.client import MasterClient, normalize_master_url
from pedl.errors import Conflict, InvalidArgument, NotFound, PedlError, Unauthenticated, Unavailable
from tests.cli.fake_master import NDJSON, FakeMaster, log


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("localhost", "http://localhost:8080"),
        ("localhost:9000", "http://localhost:9000"),
        ("10.0.0.5:8080/", "http://10.0.0.5:8080"),
        ("http://example.com", "http://example.com:80"),
        ("https://example.com", "https://example.com:443"),
        ("HTTP://Host:81", "http://host:81"),
        (" http://h:1/prefix/ ", "http://h:1/prefix"),
        ("[::1]:8080", "http://[::1]:8080"),
    ],
)
def test_normalize_master_url(given: str, expected: str) -> None:
    assert normalize_master_url(given) == expected


@pytest.mark.parametrize("bad", ["ftp://h", "http://", "http://u:p@h:1", "http://h:1?x=1", "h:notaport"])
def test_normalize_master_url_rejects(bad: str) -> None:
    with pytest.raises(InvalidArgument, match="invalid master URL"):
        normalize_master_url(bad)


def test_auto_login_as_determined_with_blank_password(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/agents", {"agents": []})
    client = MasterClient(master.url)
    assert client.get("/api/v1/agents") == {"agents": []}
    (login,) = master.calls("POST", "/api/v1/auth/login")
    assert login.json == {"username": "determined", "password": "", "isHashed": True}
    token = AuthStore().token(master.url, "determined")
    assert master.calls("GET", "/api/v1/agents")[0].headers["authorization"] == f"Bearer {token}"
    assert AuthStore().active_user(master.url) is None  # like det, auto-login sets no active user
    MasterClient(master.url).get("/api/v1/agents")
    assert len(master.calls("POST", "/api/v1/auth/login")) == 1  # the cached token is reused


def test_a_refused_cached_token_relogs_in_once_for_determined(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/agents", {"agents": []})
    AuthStore().set_token(master.url, "determined", "stale")
    MasterClient(master.url).get("/api/v1/agents")
    assert [r.path for r in master.requests] == ["/api/v1/agents", "/api/v1/auth/login", "/api/v1/agents"]


def test_a_refused_token_of_a_named_user_asks_for_login(master: FakeMaster) -> None:
    store = AuthStore()
    store.set_token(master.url, "alice", "stale")
    store.set_active_user(master.url, "alice")
    with pytest.raises(Unauthenticated, match="pedl user login alice"):
        MasterClient(master.url).get("/api/v1/agents")
    assert master.calls("POST", "/api/v1/auth/login") == []
    assert store.token(master.url, "alice") is None


def test_failed_auto_login_says_how_to_log_in(master: FakeMaster) -> None:
    master.passwords["determined"] = "set-by-admin"
    with pytest.raises(Unauthenticated, match="invalid credentials.*pedl user login"):
        MasterClient(master.url).get("/api/v1/agents")


def test_server_errors_are_rebuilt_as_pedl_errors(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/experiments/7", (404, {"code": "not_found", "message": "experiment 7 not found"}))
    master.route("POST", "/api/v1/x", (409, {"message": "busy"}))
    master.route("GET", "/api/v1/plain", (500, "oops"))
    client = MasterClient(master.url)
    with pytest.raises(NotFound, match="experiment 7 not found"):
        client.get("/api/v1/experiments/7")
    with pytest.raises(Conflict, match="busy"):
        client.post("/api/v1/x", {})
    with pytest.raises(PedlError, match="GET /api/v1/plain failed with HTTP 500"):
        client.get("/api/v1/plain")


def test_post_without_body_sends_none(master: FakeMaster) -> None:
    master.route("POST", "/api/v1/experiments/1/kill", {})
    MasterClient(master.url).post("/api/v1/experiments/1/kill")
    assert master.calls("POST", "/api/v1/experiments/1/kill")[0].body == b""


def test_query_booleans_and_lists(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/q", {})
    MasterClient(master.url).get("/api/v1/q", archived=False, users=["a", "b"], skip=None)
    (req,) = master.calls("GET", "/api/v1/q")
    assert req.query == {"archived": ["false"], "users": ["a", "b"]}


def test_paginate_follows_end_index(master: FakeMaster) -> None:
    def pages(req):
        offset = int(req.q("offset"))
        items = list(range(offset, min(offset + 2, 5)))
        return {
            "items": items,
            "pagination": {
                "offset": offset,
                "limit": 2,
                "startIndex": offset,
                "endIndex": offset + len(items),
                "total": 5,
            },
        }

    master.route("GET", "/api/v1/items", pages)
    assert MasterClient(master.url).paginate("/api/v1/items", "items", page_size=2) == [0, 1, 2, 3, 4]
    assert [r.q("offset") for r in master.calls("GET", "/api/v1/items")] == ["0", "2", "4"]


def test_stream_ndjson_yields_results_and_raises_stream_errors(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/trials/1/logs", NDJSON([log(1, "a"), log(2, "b")]))
    master.route(
        "GET",
        "/api/v1/trials/2/logs",
        NDJSON(
            [],
            raw_lines=[
                '{"result": {"id": "1", "message": "x\\n"}}',
                "",
                '{"error": {"message": "boom", "httpCode": 404}}',
            ],
        ),
    )
    client = MasterClient(master.url)
    assert [r["message"] for r in client.stream_ndjson("/api/v1/trials/1/logs")] == ["a\n", "b\n"]
    got = []
    with pytest.raises(NotFound, match="boom"):
        for record in client.stream_ndjson("/api/v1/trials/2/logs"):
            got.append(record)
    assert got == [{"id": "1", "message": "x\n"}]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connection_refused_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(Unavailable, match=f"cannot reach the master at {url}"):
        MasterClient(url).get("/api/v1/agents")


def test_an_https_master_is_verified_against_the_given_ca(tmp_path, monkeypatch) -> None:
    from tests.support.tls import https_json_server, write_tls_files

    monkeypatch.delenv("PEDL_MASTER_CERT", raising=False)
    tls = write_tls_files(tmp_path / "tls")
    with https_json_server(tls, {"version": "x"}) as (url, paths):
        assert MasterClient(url, cert=str(tls.ca)).request("GET", "/info", auth=False) == {"version": "x"}
        for cert, trusted in ((str(tls.other_ca), f"the CA in {tls.other_ca}"), (None, "the system's CAs")):
            with pytest.raises(Unavailable) as caught:
                MasterClient(url, cert=cert).request("GET", "/info", auth=False)
            assert caught.value.message == (
                f"the TLS certificate of the master at {url} could not be verified against {trusted} "
                f"(self-signed certificate in certificate chain): pass the CA certificate that signed the "
                f"master's with --cert FILE or PEDL_MASTER_CERT"
            )
    assert paths == ["/info"]


def test_an_unreadable_ca_file_is_an_invalid_argument_and_plain_http_ignores_it(tmp_path) -> None:
    with pytest.raises(InvalidArgument, match=f"cannot read the master's CA certificate {tmp_path / 'x.pem'}"):
        MasterClient("https://127.0.0.1:1", cert=str(tmp_path / "x.pem"))
    MasterClient("http://127.0.0.1:1", cert=str(tmp_path / "x.pem")).close()
