"""Large JSON answers (chart series): encoded by the json module's C encoder directly, not walked by
FastAPI's jsonable_encoder first (seconds for a few hundred thousand numbers), and gzip-compressed
(level 1: a fraction of the encoding's cost) for clients that accept it."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping
from typing import Any

from fastapi import Request, Response

GZIP_MIN_BYTES = 16 * 1024


def accepts_gzip(header: str) -> bool:
    """Whether an Accept-Encoding header admits gzip (a q of 0 refuses it)."""
    for part in header.split(","):
        name, _, params = part.strip().partition(";")
        if name.strip().lower() in ("gzip", "*"):
            q = params.strip().lower()
            if q.startswith("q="):
                try:
                    return float(q[2:]) > 0
                except ValueError:
                    return False
            return True
    return False


def json_body(request: Request, content: Any, headers: Mapping[str, str] | None = None) -> Response:
    """`content` as a JSON response carrying `headers` (a dependency's ETag, say)."""
    body = json.dumps(content, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    out = {k: v for k, v in dict(headers or {}).items() if k.lower() not in ("content-length", "content-type")}
    out["Vary"] = "Accept-Encoding"
    if len(body) >= GZIP_MIN_BYTES and accepts_gzip(request.headers.get("accept-encoding", "")):
        body = gzip.compress(body, compresslevel=1, mtime=0)
        out["Content-Encoding"] = "gzip"
    return Response(body, media_type="application/json", headers=out)
