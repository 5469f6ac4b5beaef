"""pedl.common.tls: a CA and the server certificate it signs pass a real TLS handshake for the names
they were made for, and no other; the pair check names what is wrong."""

from __future__ import annotations

import ssl
from datetime import UTC, datetime, timedelta

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from pedl.common.tls import (
    PairError,
    check_server_pair,
    generate_ca,
    generate_server_certificate,
    issue_server_certificate,
)


def handshake(server_cert: bytes, server_key: bytes, ca_pem: bytes, server_name: str, tmp_path) -> None:
    """A TLS handshake in memory: a server with this certificate, a client trusting only `ca_pem`
    that dials `server_name`. Raises ssl.SSLCertVerificationError when the client refuses."""
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(server_cert)
    key_file.write_bytes(server_key)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(cert_file, key_file)
    client_ctx = ssl.create_default_context(cadata=ca_pem.decode())
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname=server_name)
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    done = {"client": False, "server": False}
    for _ in range(20):
        for side, obj in (("client", client), ("server", server)):
            if not done[side]:
                try:
                    obj.do_handshake()
                    done[side] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return
    raise AssertionError("the handshake did not finish")


def test_the_server_certificate_verifies_against_its_ca_for_its_names(tmp_path) -> None:
    ca, server = generate_server_certificate(
        dns_names=["localhost", "Master.Example.com"], ip_addresses=["127.0.0.1", "::1"]
    )
    assert server.ca_cert_pem == ca.cert_pem
    for name in ("localhost", "master.example.com", "127.0.0.1", "::1"):
        handshake(server.cert_pem, server.key_pem, ca.cert_pem, name, tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(server.cert_pem, server.key_pem, ca.cert_pem, "10.0.0.1", tmp_path)
    with pytest.raises(ssl.SSLCertVerificationError, match="mismatch"):
        handshake(server.cert_pem, server.key_pem, ca.cert_pem, "other.example.com", tmp_path)


def test_another_ca_does_not_verify_it(tmp_path) -> None:
    _, server = generate_server_certificate(ip_addresses=["127.0.0.1"])
    other = generate_ca(common_name="other")
    with pytest.raises(ssl.SSLCertVerificationError, match="certificate verify failed"):
        handshake(server.cert_pem, server.key_pem, other.cert_pem, "127.0.0.1", tmp_path)


def test_a_ca_signs_several_servers_and_only_servers() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    ca = generate_ca(now=now)
    first = issue_server_certificate(ca, dns_names=["a.example"], now=now)
    second = issue_server_certificate(ca, dns_names=["b.example"], valid_days=30, now=now)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    assert ca_cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca_cert.not_valid_after_utc - ca_cert.not_valid_before_utc > timedelta(days=3649)
    leaf, chained_ca = x509.load_pem_x509_certificates(second.cert_pem)
    assert chained_ca == ca_cert  # the server presents its chain
    assert leaf.issuer == ca_cert.subject
    assert not leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert leaf.not_valid_before_utc <= now < leaf.not_valid_after_utc <= now + timedelta(days=31)
    assert x509.ExtendedKeyUsageOID.SERVER_AUTH in leaf.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert first.key_pem != second.key_pem
    assert b"ENCRYPTED" not in first.key_pem


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({}, "dns_names/ip_addresses"),
        ({"ip_addresses": ["300.1.1.1"]}, "ip_addresses"),
        ({"dns_names": ["bad name"]}, "dns_names"),
        ({"dns_names": [""]}, "dns_names"),
    ],
)
def test_bad_names_are_refused_naming_the_argument(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=f"^{field}: "):
        generate_server_certificate(**kwargs)


def test_check_server_pair_accepts_a_matching_pair_and_names_what_is_wrong() -> None:
    _, server = generate_server_certificate(dns_names=["localhost"])
    _, other = generate_server_certificate(dns_names=["localhost"])
    check_server_pair(server.cert_pem, server.key_pem)
    key = serialization.load_pem_private_key(server.key_pem, password=None)
    encrypted = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.BestAvailableEncryption(b"secret")
    )
    cases = [
        (b"not a certificate", server.key_pem, "cert", "not a PEM certificate"),
        (server.cert_pem, b"not a key", "key", "not a PEM private key"),
        (server.cert_pem, encrypted, "key", "encrypted"),
        (server.cert_pem, other.key_pem, "key", "does not belong"),
        (server.key_pem, server.key_pem, "cert", "not a PEM certificate"),
    ]
    for cert, key_pem, field, message in cases:
        with pytest.raises(PairError, match=message) as caught:
            check_server_pair(cert, key_pem)
        assert caught.value.field == field
