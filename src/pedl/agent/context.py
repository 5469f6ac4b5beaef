"""The model definition of a task: fetched from the master as a base64 tgz and unpacked safely.

Errors come out as `ContextError` with a message fit to show the user in the task's logs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gzip
import io
import os
import ssl
import stat
import tarfile
import zlib
from pathlib import Path

import httpx

from pedl.common.master_trust import tls_failure_message

DOWNLOAD_ATTEMPTS = 3
DOWNLOAD_TIMEOUT_S = 60.0


class ContextError(Exception):
    """The model definition could not be downloaded or unpacked."""


async def fetch_context(
    url: str, session_token: str, ssl_context: ssl.SSLContext | None = None, cert: Path | None = None
) -> bytes:
    """GET `url` with the task's bearer token; return the decoded tgz bytes. `ssl_context`
    verifies an https:// master (None: httpx's default CAs); `cert` names its CA file in errors.

    Connection errors and 5xx are retried a few times (the master may be restarting); other
    failures are final.
    """
    headers = {"Authorization": f"Bearer {session_token}"}
    last_error = ""
    verify: ssl.SSLContext | bool = ssl_context if ssl_context is not None else True
    async with httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_S, verify=verify) as client:
        for attempt in range(DOWNLOAD_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.5 * 2**attempt)
            try:
                response = await client.get(url, headers=headers)
            except httpx.HTTPError as exc:
                untrusted = tls_failure_message(exc, url, cert)
                if untrusted is not None:
                    raise ContextError(f"downloading the model definition failed: {untrusted}") from None
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code >= 500:
                last_error = f"HTTP {response.status_code}"
                continue
            if response.status_code != 200:
                raise ContextError(
                    f"downloading the model definition from {url} failed: "
                    f"HTTP {response.status_code} {response.text[:200]}"
                )
            return _decode(response)
    raise ContextError(f"downloading the model definition from {url} failed: {last_error}")


def _decode(response: httpx.Response) -> bytes:
    try:
        b64 = response.json()["b64Tgz"]
        return base64.b64decode(b64 or "", validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ContextError(f'the master\'s model definition is not {{"b64Tgz": ...}}: {exc}') from exc


def unpack_context(tgz: bytes, dest: Path) -> None:
    """Extract a (gzipped) tar into `dest`, refusing members that would land outside it."""
    if not tgz:
        return  # an experiment without files
    root = dest.resolve()
    try:
        with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:*") as archive:
            members = archive.getmembers()
            for member in members:
                target = (root / member.name).resolve()
                if target != root and root not in target.parents:
                    raise ContextError(f"the model definition has a path outside its directory: {member.name!r}")
            if hasattr(tarfile, "data_filter"):
                # the "data" filter also refuses links out of the tree, devices, and setuid bits
                archive.extractall(root, members=members, filter="data")
            else:  # Python before 3.11.4 (Debian 12's 3.11.2): the same guards by hand
                archive.extractall(root, members=[_plain(root, m) for m in members])
        _owner_writable(root)
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ContextError(f"the model definition is not a valid tgz archive: {exc}") from exc
    except OSError as exc:
        raise ContextError(f"unpacking the model definition into {root} failed: {exc}") from exc


def _owner_writable(root: Path) -> None:
    """The task owns its copy: what was read-only where it was packed (a read-only checkout) is writable
    by the task's user here, as it is to the root user of Determined's containers."""
    for directory, _dirs, files in os.walk(root):
        os.chmod(directory, os.stat(directory).st_mode & 0o7777 | stat.S_IRWXU)
        for name in files:
            path = os.path.join(directory, name)
            if not os.path.islink(path):
                os.chmod(path, os.stat(path).st_mode & 0o7777 | stat.S_IRUSR | stat.S_IWUSR)


def _plain(root: Path, member: tarfile.TarInfo) -> tarfile.TarInfo:
    """What the "data" filter allows, for a Python without it: files, directories and links that stay
    inside `root`, without setuid, setgid or sticky bits and without write access for others."""
    if member.isdev():
        raise ContextError(f"the model definition has a device or fifo: {member.name!r}")
    if member.issym() or member.islnk():
        base = (root / member.name).parent if member.issym() else root
        target = (base / member.linkname).resolve()
        if target != root and root not in target.parents:
            raise ContextError(
                f"the model definition has a link outside its directory: {member.name!r} -> {member.linkname!r}"
            )
    member.mode &= 0o755
    return member
