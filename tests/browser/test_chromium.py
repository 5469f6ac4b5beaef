"""The browser-test infrastructure on its own, without a master or the built UI: Playwright drives
Debian's chromium, which renders a page and runs its script."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def test_chromium_renders_a_data_url_and_runs_its_script(page) -> None:
    from playwright.sync_api import expect

    page.goto(
        "data:text/html,<title>t</title><p id=p>static</p>"
        "<script>document.getElementById('p').textContent = 'rendered ' + (6 * 7)</script>"
    )
    expect(page.locator("#p")).to_have_text("rendered 42")
    assert page.viewport_size == {"width": 1400, "height": 900}
    assert "Chrome/" in page.evaluate("navigator.userAgent")
