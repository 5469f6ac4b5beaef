"""pedl.common.master_trust: which CA a client trusts, and the message a failed verification gives,
checked with real handshakes against a small HTTPS server."""

from __future__ import annotations

import httpx
import pytest

from pedl.common.master_trust import (
    MasterCertError,
    client_ssl_context,
    master_cert_from_env,
    tls_failure,
    tls_failure_message,
)
from tests.support.tls import TlsFiles, https_json_server, write_tls_files


@pytest.fixture
def tls(tmp_path) -> TlsFiles:
    return write_tls_files(tmp_path / "tls")


def test_the_right_ca_verifies_the_master(tls: TlsFiles) -> None:
    with https_json_server(tls, {"ok": True}) as (url, paths):
        assert httpx.get(f"{url}/info", verify=client_ssl_context(tls.ca)).json() == {"ok": True}
        localhost = url.replace("127.0.0.1", "localhost")
        assert httpx.get(f"{localhost}/info", verify=client_ssl_context(str(tls.ca))).status_code == 200
    assert paths == ["/info", "/info"]


@pytest.mark.parametrize("which", ["other CA", "system CAs"])
def test_a_wrong_ca_is_refused_with_a_message_naming_it_and_the_remedy(tls: TlsFiles, which: str) -> None:
    cert = tls.other_ca if which == "other CA" else None
    with https_json_server(tls, {}) as (url, paths), pytest.raises(httpx.ConnectError) as caught:
        httpx.get(f"{url}/info", verify=client_ssl_context(cert))
    assert paths == []
    message = tls_failure_message(caught.value, url, cert)
    assert message is not None
    assert message.startswith(f"the TLS certificate of the master at {url} could not be verified against ")
    assert (f"the CA in {tls.other_ca}" if cert else "the system's CAs") in message
    assert message.endswith("pass the CA certificate that signed the master's with --cert FILE or PEDL_MASTER_CERT")


def test_a_host_the_certificate_does_not_name_is_refused_saying_so(tls: TlsFiles) -> None:
    with (
        https_json_server(tls, {}) as (url, paths),
        httpx.Client(verify=client_ssl_context(tls.ca)) as client,
        pytest.raises(httpx.ConnectError) as caught,
    ):  # dialled as a name the certificate lacks
        client.get(url, extensions={"sni_hostname": "elsewhere.example"})
    assert paths == []
    message = tls_failure_message(caught.value, "https://elsewhere.example:8443", tls.ca)
    assert message is not None and "connect with a host name or address that the certificate names" in message


def test_plain_http_at_an_https_url_is_named(tls: TlsFiles) -> None:
    import http.server
    import threading

    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.BaseHTTPRequestHandler)
    threading.Thread(target=httpd.handle_request, daemon=True).start()
    url = f"https://127.0.0.1:{httpd.server_address[1]}"
    try:
        with pytest.raises(httpx.ConnectError) as caught:
            httpx.get(url, verify=client_ssl_context(tls.ca), timeout=5)
    finally:
        httpd.server_close()
    assert "does not speak TLS" in (tls_failure_message(caught.value, url, tls.ca) or "")


def test_other_failures_are_not_tls_failures() -> None:
    error = httpx.ConnectError("connection refused")
    assert tls_failure(error) is None
    assert tls_failure_message(error, "https://h:1", None) is None


def test_an_unusable_ca_file_is_named(tmp_path) -> None:
    with pytest.raises(MasterCertError, match=f"cannot read the master's CA certificate {tmp_path / 'nope.pem'}"):
        client_ssl_context(tmp_path / "nope.pem")
    (tmp_path / "empty.pem").write_text("hello\n")
    with pytest.raises(MasterCertError, match="holds no PEM certificate"):
        client_ssl_context(tmp_path / "empty.pem")


def test_the_ca_file_comes_from_pedl_then_determined_variables() -> None:
    assert master_cert_from_env({}) is None
    assert master_cert_from_env({"DET_MASTER_CERT_FILE": "/d.pem"}) == "/d.pem"
    assert master_cert_from_env({"PEDL_MASTER_CERT": "/p.pem", "DET_MASTER_CERT_FILE": "/d.pem"}) == "/p.pem"
    assert master_cert_from_env({"PEDL_MASTER_CERT": ""}) is None
