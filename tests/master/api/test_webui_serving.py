"""The master serves the WebUI as its router's default: the page for any GET outside the API (deep
links), hashed assets cached for good, the master's own paths and the API's 404s unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from pedl.config.master_config import MasterConfig
from pedl.master.api import webui
from pedl.master.app import create_app

PAGE = b"<!doctype html><title>pedl</title><script src=/assets/app-1a2b.js></script>"


@pytest.fixture
def db_kind() -> str:
    """Serving files reads no row: SQLite only (the conftest's runs every test on both databases)."""
    return "sqlite"


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "static"
    (root / "assets").mkdir(parents=True)
    (root / "index.html").write_bytes(PAGE)
    (root / "assets" / "app-1a2b.js").write_text("console.log('pedl')")
    (root / "favicon.svg").write_text("<svg/>")
    monkeypatch.setattr(webui, "STATIC", root)
    return root


@pytest.fixture
def ui_client(built: Path, master_config: MasterConfig):
    with TestClient(create_app(master_config)) as c:
        yield c


@pytest.mark.parametrize("path", ["/", "/experiments", "/experiments/12?state=ACTIVE", "/trials/3", "/no/such/page"])
def test_every_page_path_gets_the_page(ui_client: TestClient, path: str) -> None:
    r = ui_client.get(path)
    assert r.status_code == 200 and r.content == PAGE
    assert r.headers["content-type"].startswith("text/html")
    assert r.headers["cache-control"] == "no-cache"
    assert "script-src 'self'" in r.headers["content-security-policy"]
    assert r.headers["x-frame-options"] == "DENY"


def test_assets_are_served_and_cached_for_good(ui_client: TestClient) -> None:
    r = ui_client.get("/assets/app-1a2b.js")
    assert r.status_code == 200 and r.text == "console.log('pedl')"
    assert "javascript" in r.headers["content-type"] and "immutable" in r.headers["cache-control"]
    assert ui_client.get("/favicon.svg").text == "<svg/>"
    assert ui_client.get("/assets/app-old.js").status_code == 404


@pytest.mark.parametrize("path", ["/assets/../index.html", "/assets/..%2f..%2fetc/passwd", "/assets/%2e%2e/x"])
def test_no_path_from_a_request_reaches_the_file_system(ui_client: TestClient, path: str) -> None:
    r = ui_client.get(path)
    assert r.status_code == 404 or r.content == PAGE, (r.status_code, r.content[:200])  # the page at most


def test_the_masters_own_paths_are_unchanged(ui_client: TestClient) -> None:
    assert ui_client.get("/info").json()["version"]
    r = ui_client.get("/api/v1/no-such-route")
    assert r.status_code == 404 and r.json()["code"] == 5  # the API's JSON 404, not the page
    assert ui_client.post("/experiments").status_code == 404  # only GETs get the page
    assert ui_client.get("/api/v1/experiments").status_code == 401
    # Determined's /api-less JSON routes that det's e2e suite reads: JSON, never the page
    assert ui_client.get("/tasks").status_code == 401
    assert ui_client.get("/tasks/x").status_code == 404


def test_an_install_without_the_built_ui_says_how_to_build_it(
    master_config: MasterConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webui, "STATIC", tmp_path / "nothing")
    with TestClient(create_app(master_config)) as c:
        r = c.get("/experiments")
    assert r.status_code == 503 and "make webui" in r.text
