"""TLS material for a master: a CA and the server certificate it signs, as PEM bytes, and the checks
master.yaml's `security.tls` runs on a certificate and key. Tests and `pedl deploy aws up --tls` use both."""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.types import PublicKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_VALID_DAYS = 3650
SERVER_VALID_DAYS = 825  # the longest validity clients such as Apple's still accept
CLOCK_SKEW = timedelta(hours=1)  # valid a little before it was made, for hosts whose clocks lag


@dataclass(frozen=True)
class CertificateAuthority:
    cert_pem: bytes  # what clients trust: `pedl --cert`, `pedl agent run --cert`, PEDL_MASTER_CERT
    key_pem: bytes  # signs server certificates; keep it off the master when you can


@dataclass(frozen=True)
class ServerCertificate:
    cert_pem: bytes  # the server's certificate, then the CA's: master.yaml's security.tls.cert
    key_pem: bytes  # unencrypted PKCS#8: security.tls.key (mode 0600)
    ca_cert_pem: bytes  # the CA clients verify it against


def generate_ca(
    *, common_name: str = "pedl cluster CA", valid_days: int = CA_VALID_DAYS, now: datetime | None = None
) -> CertificateAuthority:
    """A new self-signed CA (ECDSA P-256) that may sign server certificates, not other CAs."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = (now or datetime.now(UTC)) - CLOCK_SKEW
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CLOCK_SKEW + timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CertificateAuthority(cert_pem=cert.public_bytes(serialization.Encoding.PEM), key_pem=_key_pem(key))


def issue_server_certificate(
    ca: CertificateAuthority,
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    valid_days: int = SERVER_VALID_DAYS,
    now: datetime | None = None,
) -> ServerCertificate:
    """A server certificate signed by `ca` for these host names and addresses (clients check
    that the host they dial is one of them)."""
    alt_names = _alt_names(dns_names, ip_addresses)
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ValueError("ca: the CA key must be an ECDSA key made by generate_ca")
    key = ec.generate_private_key(ec.SECP256R1())
    start = (now or datetime.now(UTC)) - CLOCK_SKEW
    first = str(alt_names[0].value)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, first)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + CLOCK_SKEW + timedelta(days=valid_days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.cert_pem
    return ServerCertificate(cert_pem=chain, key_pem=_key_pem(key), ca_cert_pem=ca.cert_pem)


def generate_server_certificate(
    *,
    dns_names: Sequence[str] = (),
    ip_addresses: Sequence[str] = (),
    ca_common_name: str = "pedl cluster CA",
    now: datetime | None = None,
) -> tuple[CertificateAuthority, ServerCertificate]:
    """A new CA and a server certificate it signs, in one call."""
    _alt_names(dns_names, ip_addresses)  # bad names fail before any key is made
    ca = generate_ca(common_name=ca_common_name, now=now)
    return ca, issue_server_certificate(ca, dns_names=dns_names, ip_addresses=ip_addresses, now=now)


class PairError(ValueError):
    """A certificate and key that cannot serve TLS together; `field` is "cert" or "key"."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_server_pair(cert_pem: bytes, key_pem: bytes) -> None:
    """Raise PairError unless `cert_pem` holds PEM certificates, `key_pem` an unencrypted private
    key, and the key belongs to the first certificate."""
    try:
        certs = x509.load_pem_x509_certificates(cert_pem)
    except ValueError:
        raise PairError("cert", "not a PEM certificate (-----BEGIN CERTIFICATE-----)") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except TypeError:
        raise PairError(
            "key", "the private key is encrypted; the master needs it unencrypted (readable by the master's user only)"
        ) from None
    except ValueError:
        raise PairError("key", "not a PEM private key (-----BEGIN PRIVATE KEY-----)") from None
    except Exception as exc:  # an unsupported algorithm raises cryptography's own errors
        raise PairError("key", f"cannot load the private key: {exc}") from None
    if _spki(key.public_key()) != _spki(certs[0].public_key()):
        raise PairError("key", "this private key does not belong to the (first) certificate in cert")


def _alt_names(dns_names: Sequence[str], ip_addresses: Sequence[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for name in dns_names:
        if not name or not name.isascii() or any(c.isspace() for c in name):
            raise ValueError(f"dns_names: {name!r} is not a host name")
        names.append(x509.DNSName(name.lower()))
    for raw in ip_addresses:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(raw)))
        except ValueError:
            raise ValueError(f"ip_addresses: {raw!r} is not an IP address") from None
    if not names:
        raise ValueError("dns_names/ip_addresses: a server certificate needs at least one name or address")
    return names


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _spki(public_key: PublicKeyTypes) -> bytes:
    return public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
