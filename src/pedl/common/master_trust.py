"""How pedl's clients (the CLI, agents, pedl.core in tasks) trust a master served over HTTPS: the
system's CAs, or one CA file (`--cert`, PEDL_MASTER_CERT); and what to say when that fails."""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from pathlib import Path

MASTER_CERT_ENV = "PEDL_MASTER_CERT"
# what Determined's harness and CLI read; agents set both for their tasks
DET_MASTER_CERT_ENV = "DET_MASTER_CERT_FILE"
CERT_HINT = "--cert FILE or PEDL_MASTER_CERT"

# OpenSSL's verify codes for a certificate that is trusted but names another host
_NAME_MISMATCH = {62, 64}  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH


class MasterCertError(ValueError):
    """The CA file to verify the master against cannot be used."""


def master_cert_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The CA file a task or agent was given: PEDL_MASTER_CERT, else Determined's DET_MASTER_CERT_FILE."""
    env = os.environ if environ is None else environ
    return env.get(MASTER_CERT_ENV) or env.get(DET_MASTER_CERT_ENV) or None


def client_ssl_context(cert_file: str | os.PathLike[str] | None) -> ssl.SSLContext:
    """Verify the master against `cert_file` only, or without one against the system's CAs
    (plus certifi's bundle, for hosts that ship none). Host names are always checked."""
    if cert_file is None:
        context = ssl.create_default_context()
        try:
            import certifi

            context.load_verify_locations(cafile=certifi.where())
        except (ImportError, OSError, ssl.SSLError):
            pass  # the system's store alone
        return context
    path = Path(cert_file).expanduser()
    try:
        return ssl.create_default_context(cafile=str(path))
    except ssl.SSLError:  # before OSError, of which it is a kind
        raise MasterCertError(
            f"the master's CA certificate {path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
        ) from None
    except OSError as exc:
        raise MasterCertError(f"cannot read the master's CA certificate {path}: {exc.strerror or exc}") from None


def tls_failure(exc: BaseException) -> ssl.SSLError | None:
    """The TLS error behind `exc` (httpx and websockets wrap it), if there is one."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ssl.SSLError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def tls_failure_message(
    exc: BaseException, url: str, cert_file: str | os.PathLike[str] | None, hint: str = CERT_HINT
) -> str | None:
    """What to tell the user when `exc` is a failed TLS handshake with the master at `url`; None
    when it is not one. Names the CA in use and how to pass the right one."""
    error = tls_failure(exc)
    if error is None:
        return None
    if isinstance(error, ssl.SSLCertVerificationError):
        reason = error.verify_message or error.reason or "verification failed"
        if error.verify_code in _NAME_MISMATCH:
            return (
                f"the TLS certificate of the master at {url} could not be verified ({reason}): "
                "connect with a host name or address that the certificate names"
            )
        trusted = f"the CA in {cert_file}" if cert_file else "the system's CAs"
        return (
            f"the TLS certificate of the master at {url} could not be verified against {trusted} "
            f"({reason}): pass the CA certificate that signed the master's with {hint}"
        )
    reason = error.reason or str(error)
    if reason == "WRONG_VERSION_NUMBER":
        return f"the master at {url} does not speak TLS ({reason}): if it serves plain HTTP, use an http:// URL"
    return f"the TLS handshake with the master at {url} failed ({reason})"
