"""The WebUI: the router's default, so every GET no route takes (outside /api/) gets the page, and
the page's own router shows the view (deep links, reloads, back and forward). Files come only from
the list made at start from the package's built assets (pedl/webui/static, `make webui`); no path
from a request reaches the file system."""

from __future__ import annotations

from pathlib import Path

from starlette.responses import FileResponse, HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

import pedl.webui

STATIC = Path(pedl.webui.__file__).resolve().parent / "static"
NOT_PAGES = ("/api/", "/agents/", "/info", "/metrics", "/tasks")  # the master's own: 404s there, never the page
# the page's code and styles come from the master alone; nothing may frame it
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
)
PAGE_HEADERS = {
    "Cache-Control": "no-cache",
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}
ASSET_HEADERS = {"Cache-Control": "public, max-age=31536000, immutable", "X-Content-Type-Options": "nosniff"}
NOT_BUILT = """<!doctype html><meta charset="utf-8"><title>pedl</title>
<p>This pedl master was installed without its WebUI. Build it with <code>make webui</code> (it needs
<code>npm</code>) and restart the master. The REST API is at <code>/api/v1</code>.</p>"""


class WebUI:
    def __init__(self, not_found: ASGIApp, root: Path | None = None) -> None:
        self.not_found = not_found
        root = root or STATIC
        index = root / "index.html"
        self.index = index.read_bytes() if index.is_file() else None
        self.files: dict[str, Path] = {}
        for folder, prefix in ((root, "/"), (root / "assets", "/assets/")):
            if folder.is_dir():
                self.files.update(
                    {prefix + p.name: p for p in folder.iterdir() if p.is_file() and p.name != "index.html"}
                )

    def is_page(self, scope: Scope) -> bool:
        path = scope.get("path", "")
        return (
            scope["type"] == "http"
            and scope.get("method") in ("GET", "HEAD")
            and not any(path == p.rstrip("/") or path.startswith(p) for p in NOT_PAGES)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.is_page(scope):
            await self.not_found(scope, receive, send)
            return
        path = scope["path"]
        asset = self.files.get(path)
        if asset is not None and asset.is_file():  # a rebuild while the master runs removes old ones
            response = FileResponse(asset, headers=ASSET_HEADERS)
        elif path.startswith("/assets/"):
            await self.not_found(scope, receive, send)  # an old build's file: 404, not the page
            return
        elif self.index is None:
            response = HTMLResponse(NOT_BUILT, status_code=503, headers=PAGE_HEADERS)
        else:
            response = HTMLResponse(self.index, headers=PAGE_HEADERS)
        await response(scope, receive, send)
