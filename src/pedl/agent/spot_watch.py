"""Watches the instance metadata service for the two-minute spot interruption notice
(`/latest/meta-data/spot/instance-action`, IMDSv2) and reports it once."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable

import httpx

log = logging.getLogger(__name__)
TOKEN_TTL = "21600"


async def fetch_notice(client: httpx.AsyncClient, imds_url: str) -> dict | None:
    """The notice as {"action", "time"}, or None while there is none (404)."""
    token = await client.put(
        f"{imds_url}/latest/api/token", headers={"X-aws-ec2-metadata-token-ttl-seconds": TOKEN_TTL}
    )
    token.raise_for_status()
    r = await client.get(
        f"{imds_url}/latest/meta-data/spot/instance-action", headers={"X-aws-ec2-metadata-token": token.text}
    )
    if r.status_code == 404:
        return None
    r.raise_for_status()
    try:
        data = json.loads(r.text)
    except ValueError:
        data = {"action": r.text.strip()}
    return data if isinstance(data, dict) else {"action": str(data)}


async def watch_spot(imds_url: str, interval: float, on_notice: Callable[[dict], None]) -> None:
    """Poll until a notice appears, report it, and stop. Metadata errors are logged, not fatal."""
    failures = 0
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            try:
                notice = await fetch_notice(client, imds_url.rstrip("/"))
                failures = 0
            except httpx.HTTPError as exc:
                failures += 1
                if failures in (1, 10) or failures % 100 == 0:
                    log.warning("spot watch: cannot read instance metadata at %s: %s", imds_url, exc)
                notice = None
            if notice is not None:
                log.warning("spot interruption notice: %s", notice)
                on_notice(notice)
                return
            await asyncio.sleep(interval)
