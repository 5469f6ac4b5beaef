"""Run by the deployed master's user data, with the pedl it just installed, at every boot: makes the
agent token and the TLS files on the data volume (once), and writes master.yaml from its template with
the database password read from Secrets Manager through the instance's role. No secret passes through
argv, the user data or the template; master.yaml is validated before it replaces the old one."""

from __future__ import annotations

import argparse
import contextlib
import ipaddress
import json
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import yaml

from pedl.deploy.master_config_doc import tls_files

log = logging.getLogger("pedl.deploy.master_boot")

TOKEN_FILE = "agent_token"  # the file the master reads its agent token from (master/agent_token.py)
CA_KEY = "pedl-cluster/ca.crt"  # in the checkpoint bucket: what `up` hands the CLI, the CA clients trust
CA_FILE = "ca.crt"
Owner = tuple[int, int] | None  # (uid, gid) files are given to; None leaves them to the caller (tests)


class BootError(RuntimeError):
    """A step that cannot be done; the message says which and why."""


def _write_new(path: Path, data: bytes, mode: int, owner: Owner) -> None:
    """Create `path` with `mode` from the first byte (O_EXCL: never readable by others, not even briefly)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    try:
        os.write(fd, data)
        os.fsync(fd)
        if owner is not None:
            os.fchown(fd, *owner)
    finally:
        os.close(fd)


def ensure_agent_token(data_dir: Path, owner: Owner) -> bool:
    """data_dir/agent_token, made at first boot (mode 0600, the master's user's); True when made now."""
    path = data_dir / TOKEN_FILE
    if path.exists() and path.read_text().strip():
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # empty: a crash while writing it
    _write_new(path, (secrets.token_urlsafe(32) + "\n").encode(), 0o600, owner)
    return True


def _cert_addresses(cert_pem: bytes) -> set[str]:
    from cryptography import x509

    cert = x509.load_pem_x509_certificates(cert_pem)[0]
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {str(a) for a in san.get_values_for_type(x509.IPAddress)} | set(san.get_values_for_type(x509.DNSName))


def ensure_tls_files(data_dir: Path, owner: Owner, *, ip_addresses: list[str], dns_names: list[str]) -> bytes | None:
    """A CA and a server certificate for these addresses, on the data volume; made again (with a new CA)
    only when the addresses are not all in the certificate. Returns the new CA certificate, or None."""
    from pedl.common.tls import generate_server_certificate  # cryptography, only with TLS

    cert_path, key_path = (Path(p) for p in tls_files(str(data_dir)))
    wanted = set(ip_addresses) | set(dns_names)
    if cert_path.exists() and key_path.exists() and wanted <= _cert_addresses(cert_path.read_bytes()):
        return None
    cert_path.parent.mkdir(mode=0o750, exist_ok=True)
    if owner is not None:
        os.chown(cert_path.parent, *owner)
    ca, server = generate_server_certificate(
        dns_names=dns_names, ip_addresses=ip_addresses, ca_common_name="pedl cluster CA"
    )
    for path in (cert_path, key_path, cert_path.parent / CA_FILE):
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    _write_new(key_path, server.key_pem, 0o600, owner)
    _write_new(cert_path, server.cert_pem, 0o644, owner)
    _write_new(cert_path.parent / CA_FILE, ca.cert_pem, 0o644, owner)
    return ca.cert_pem


def instance_addresses(extra_ips: list[str]) -> tuple[list[str], list[str]]:
    """(IP addresses, DNS names) of this instance from its metadata, and the Elastic IP if any."""
    import httpx

    from pedl.master.provisioner.master_address import imds_get

    found: dict[str, str] = {}
    for key in ("local-ipv4", "public-ipv4", "local-hostname", "public-hostname"):
        try:
            found[key] = imds_get(key, timeout=5.0)
        except httpx.HTTPError:  # no public address: a 404
            continue
    if not found.get("local-ipv4"):
        raise BootError("the instance metadata service gave no local-ipv4 for the TLS certificate")
    ips = [v for k, v in found.items() if k.endswith("ipv4") and v] + [ip for ip in extra_ips if ip]
    names = [v for k, v in found.items() if k.endswith("hostname") and v]
    for ip in ips:
        ipaddress.ip_address(ip)
    return list(dict.fromkeys(ips)), list(dict.fromkeys(names))


def database_login(secret_id: str, region: str, endpoint_url: str | None = None) -> tuple[str, str]:
    """(user, password) from the stack's Secrets Manager secret, through the instance's role."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    client = boto3.client("secretsmanager", region_name=region, endpoint_url=endpoint_url)
    try:
        value = json.loads(client.get_secret_value(SecretId=secret_id)["SecretString"])
        return str(value["username"]), str(value["password"])
    except (ClientError, BotoCoreError) as exc:
        raise BootError(f"cannot read the database secret {secret_id}: {exc}") from None
    except (KeyError, TypeError, ValueError):
        raise BootError(f"the database secret {secret_id} holds no JSON with username and password") from None


def publish_ca(ca_pem: bytes, bucket: str, region: str, endpoint_url: str | None = None) -> str:
    """Put the CA certificate (public) where `pedl deploy aws up` fetches it for the CLI."""
    import boto3

    boto3.client("s3", region_name=region, endpoint_url=endpoint_url).put_object(
        Bucket=bucket, Key=CA_KEY, Body=ca_pem, ContentType="application/x-pem-file"
    )
    return f"s3://{bucket}/{CA_KEY}"


def render_master_config(template_text: str, login: tuple[str, str] | None) -> str:
    doc: dict[str, Any] = yaml.safe_load(template_text)
    if login is not None:
        if not isinstance(doc.get("db"), dict):
            raise BootError("the master.yaml template has no db section to put the database login in")
        doc["db"]["user"], doc["db"]["password"] = login
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)


def write_master_config(text: str, path: Path, group: int | None) -> None:
    """Validate, then replace `path` whole (mode 0640: root's, readable by the master's group)."""
    from pedl.config.master_config import load_master_config
    from pedl.errors import InvalidArgument

    tmp = path.with_name(f".{path.name}.new")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    _write_new(tmp, text.encode(), 0o640, None if group is None else (os.geteuid(), group))
    try:
        load_master_config(tmp)
    except InvalidArgument as exc:
        tmp.unlink()
        raise BootError(f"the master.yaml made for this instance is invalid, {path} is unchanged: {exc}") from None
    tmp.replace(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pedl.deploy.master_boot", description=__doc__)
    parser.add_argument("--config-template", type=Path, required=True)
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--user", help="the master's service user; files are given to it")
    parser.add_argument("--region", required=True)
    parser.add_argument("--db-secret", help="Secrets Manager secret of the database login (db=rds)")
    parser.add_argument("--tls", action="store_true", help="make the TLS files and publish the CA")
    parser.add_argument("--bucket", help="checkpoint bucket, where the CA certificate is published")
    parser.add_argument("--tls-ip", action="append", default=[], help="another address for the certificate")
    parser.add_argument("--endpoint-url", help="AWS endpoint for Secrets Manager and S3 (tests)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="pedl boot: %(message)s")
    owner: Owner = None
    if args.user:
        import pwd

        entry = pwd.getpwnam(args.user)
        owner = (entry.pw_uid, entry.pw_gid)
    try:
        if ensure_agent_token(args.data_dir, owner):
            log.info("made the agent token in %s", args.data_dir / TOKEN_FILE)
        if args.tls:
            ips, names = instance_addresses(args.tls_ip)
            ca = ensure_tls_files(args.data_dir, owner, ip_addresses=ips, dns_names=names)
            if ca is not None:
                log.info("made a TLS certificate for %s", ", ".join(ips + names))
                if args.bucket:
                    log.info(
                        "published the CA certificate at %s",
                        publish_ca(ca, args.bucket, args.region, args.endpoint_url),
                    )
        login = database_login(args.db_secret, args.region, args.endpoint_url) if args.db_secret else None
        text = render_master_config(args.config_template.read_text(), login)
        write_master_config(text, args.config, None if owner is None else owner[1])
        log.info("wrote %s", args.config)
    except BootError as exc:
        print(f"pedl boot: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
