"""The model definition of a task: fetched from the master as a base64 tgz and unpacked safely.

Errors come out as `ContextError` with a message fit to show the user in the task's logs.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import gzip
import io
import tarfile
import zlib
from pathlib import Path

import httpx

DOWNLOAD_ATTEMPTS = 3
DOWNLOAD_TIMEOUT_S = 60.0


class ContextError(Exception):
    """The model definition could not be downloaded or unpacked."""


async def fetch_context(url: str, session_token: str) -> bytes:
    """GET `url` with the task's bearer token; return the decoded tgz bytes.

    Connection errors and 5xx are retried a few times (the master may be restarting); other
    failures are final.
    """
    headers = {"Authorization": f"Bearer {session_token}"}
    last_error = ""
    async with httpx.AsyncClient(timeout=DOWNLOAD_TIMEOUT_S) as client:
        for attempt in range(DOWNLOAD_ATTEMPTS):
            if attempt:
                await asyncio.sleep(0.5 * 2**attempt)
            try:
                response = await client.get(url, headers=headers)
            except httpx.HTTPError as exc:
                last_error = f"{type(exc).__name__}: {exc}"
                continue
            if response.status_code >= 500:
                last_error = f"HTTP {response.status_code}"
                continue
            if response.status_code != 200:
                raise ContextError(
                    f"downloading the model definition from {url} failed: "
                    f"HTTP {response.status_code} {response.text[:200]}")
            return _decode(response)
    raise ContextError(f"downloading the model definition from {url} failed: {last_error}")


def _decode(response: httpx.Response) -> bytes:
    try:
        b64 = response.json()["b64Tgz"]
        return base64.b64decode(b64 or "", validate=True)
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ContextError(f"the master's model definition is not {{\"b64Tgz\": ...}}: {exc}") from exc


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
                    raise ContextError(f"the model definition has a path outside its directory: "
                                       f"{member.name!r}")
            # the "data" filter also refuses links out of the tree, devices, and setuid bits
            archive.extractall(root, members=members, filter="data")
    except (tarfile.TarError, EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise ContextError(f"the model definition is not a valid tgz archive: {exc}") from exc
    except OSError as exc:
        raise ContextError(f"unpacking the model definition into {root} failed: {exc}") from exc
