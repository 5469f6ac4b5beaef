"""The address agents use to reach the master: a plain URL, or an alias (`ec2.local-ipv4`,
`gce.internal-ip`, ...) resolved once at master start from the cloud's instance metadata service."""

from __future__ import annotations

import logging
import os

import httpx

from pedl.config.provider_config import EC2_ALIASES, GCE_ALIASES, parse_master_url
from pedl.errors import InvalidArgument, Unavailable

log = logging.getLogger(__name__)

DEFAULT_IMDS_URL = "http://169.254.169.254"
DEFAULT_GCE_URL = "http://metadata.google.internal"
IMDS_ENV = "PEDL_IMDS_URL"  # tests (and odd networks) point these at another server
GCE_ENV = "PEDL_GCE_METADATA_URL"
# the alias the seeds recommend; used when a cloud pool gives no master_url at all
DEFAULT_ALIAS = "ec2.local-ipv4"
IMDS_TOKEN_TTL = "60"  # seconds; one resolution needs the token for a moment only

_GCE_PATHS = {
    "gce.internal-ip": "computeMetadata/v1/instance/network-interfaces/0/ip",
    "gce.external-ip": "computeMetadata/v1/instance/network-interfaces/0/access-configs/0/external-ip",
}


def imds_base(imds_url: str = DEFAULT_IMDS_URL) -> str:
    """The IMDS base URL: $PEDL_IMDS_URL overrides the default (an explicit other URL wins)."""
    if imds_url == DEFAULT_IMDS_URL:
        imds_url = os.environ.get(IMDS_ENV) or imds_url
    return imds_url.rstrip("/")


def gce_base(gce_url: str = DEFAULT_GCE_URL) -> str:
    if gce_url == DEFAULT_GCE_URL:
        gce_url = os.environ.get(GCE_ENV) or gce_url
    return gce_url.rstrip("/")


def imds_get(key: str, *, imds_url: str = DEFAULT_IMDS_URL, timeout: float = 2.0) -> str:
    """GET /latest/meta-data/<key> through IMDSv2 (a session token first, as instances launched
    with HttpTokens=required demand). Raises httpx.HTTPError on any failure."""
    base = imds_base(imds_url)
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        token = client.put(f"{base}/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": IMDS_TOKEN_TTL})
        token.raise_for_status()
        r = client.get(f"{base}/latest/meta-data/{key}", headers={"X-aws-ec2-metadata-token": token.text})
        r.raise_for_status()
        return r.text.strip()


def gce_get(path: str, *, gce_url: str = DEFAULT_GCE_URL, timeout: float = 2.0) -> str:
    base = gce_base(gce_url)
    with httpx.Client(timeout=timeout, trust_env=False) as client:
        r = client.get(f"{base}/{path}", headers={"Metadata-Flavor": "Google"})
        r.raise_for_status()
        return r.text.strip()


def resolve_master_url(
    url: str | None, *, imds_url: str = DEFAULT_IMDS_URL, gce_url: str = DEFAULT_GCE_URL, timeout: float = 2.0
) -> str:
    """`scheme://host:port` for agents. Plain URLs pass through (scheme http and port 8080 when
    absent); aliases are looked up in the metadata service and keep their port. None means the
    seeds' recommended alias, ec2.local-ipv4. Raises pedl.errors.Unavailable naming the alias and
    the metadata URL when the lookup fails, InvalidArgument for a malformed URL."""
    if url is None:
        log.info("no master_url configured: using %s (port 8080)", DEFAULT_ALIAS)
        url = DEFAULT_ALIAS
    try:
        scheme, host, port, is_alias = parse_master_url(url)
    except ValueError as exc:
        raise InvalidArgument(f"master_url: {exc}") from None
    if not is_alias:
        return f"{scheme}://{host}:{port}"
    if host in EC2_ALIASES:
        key = host.removeprefix("ec2.")
        where = f"{imds_base(imds_url)}/latest/meta-data/{key}"
        try:
            value = imds_get(key, imds_url=imds_url, timeout=timeout)
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"cannot resolve master_url alias {host}: the EC2 instance metadata service at "
                f"{where} did not answer ({_why(exc)}); is the master running on EC2 with "
                f"IMDS enabled?"
            ) from exc
    else:
        assert host in GCE_ALIASES
        where = f"{gce_base(gce_url)}/{_GCE_PATHS[host]}"
        try:
            value = gce_get(_GCE_PATHS[host], gce_url=gce_url, timeout=timeout)
        except httpx.HTTPError as exc:
            raise Unavailable(
                f"cannot resolve master_url alias {host}: the GCE metadata server at {where} "
                f"did not answer ({_why(exc)}); is the master running on GCE?"
            ) from exc
    if not value:
        raise Unavailable(f"cannot resolve master_url alias {host}: {where} returned an empty value")
    log.info("master_url %s resolved to %s", host, value)
    return f"{scheme}://{value}:{port}"


def _why(exc: httpx.HTTPError) -> str:
    if isinstance(exc, httpx.HTTPStatusError):
        status = exc.response.status_code
        return f"HTTP {status}" + (" - this instance has no such address" if status == 404 else "")
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
