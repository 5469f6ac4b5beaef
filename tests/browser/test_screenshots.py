"""PNGs of each WebUI page for the docs (docs/images/webui-<page>.png, 1400x900), only with
PEDL_SCREENSHOTS=1, so that ordinary runs leave the repository alone:

    PEDL_SCREENSHOTS=1 .venv/bin/pytest -q tests/browser/test_screenshots.py
"""

from __future__ import annotations

import os
import re

import pytest

from pedl.devcluster import wait_experiment
from tests.browser.conftest import REPO, SLOW_MS, VIEWPORT, login
from tests.e2e.conftest import Cluster, steps_config

try:
    from playwright.sync_api import expect
except ImportError:  # the conftest skips these tests (fails them under CI), saying how to install it
    expect = None

pytestmark = [pytest.mark.browser, pytest.mark.e2e]
IMAGES = REPO / "docs" / "images"


def shoot(page, name: str) -> None:
    page.wait_for_load_state("networkidle")  # nothing left to fetch but the polls
    page.screenshot(path=str(IMAGES / f"webui-{name}.png"), full_page=False)


@pytest.mark.skipif(
    os.environ.get("PEDL_SCREENSHOTS") != "1",
    reason="screenshots for the docs: set PEDL_SCREENSHOTS=1 to write docs/images/webui-*.png",
)
def test_screenshots_of_every_page(dynamic_cluster: Cluster, page) -> None:
    c = dynamic_cluster
    url = c.master.url
    assert page.viewport_size == VIEWPORT
    cfg = steps_config(name="mnist-grid", steps=20, delay=0.05)
    cfg["hyperparameters"]["ckpt_every"] = {"type": "categorical", "vals": [2, 4, 5]}
    cfg["searcher"]["name"] = "grid"
    grid = c.create(cfg)
    assert wait_experiment(c.master, grid, {"STATE_COMPLETED", "STATE_ERROR"})["state"] == "STATE_COMPLETED"
    trial = min(c.trials(grid), key=lambda t: t["id"])
    running = [c.create(steps_config(name=f"long-{i}", steps=2000, delay=0.5)) for i in range(2)]
    try:
        page.goto(f"{url}/login")
        expect(page.locator("input[name=username]")).to_be_visible()
        shoot(page, "login")
        login(page, url, "determined")

        page.goto(f"{url}/experiments")
        expect(page.locator(f"tr[data-experiment-id='{running[0]}']")).to_be_visible()
        shoot(page, "experiments")

        page.goto(f"{url}/experiments/{grid}")
        expect(page.locator("[data-testid=learning-curves]")).to_have_attribute("data-points", re.compile(r"[1-9]"))
        shoot(page, "experiment")

        page.goto(f"{url}/trials/{trial['id']}")
        expect(page.locator("[data-testid=trial-logs] .log-line").first).to_be_visible()
        expect(page.locator("[data-testid=checkpoints-table] tr[data-checkpoint-uuid]").first).to_be_visible()
        shoot(page, "trial")

        page.goto(f"{url}/cluster")
        expect(page.locator("[data-testid=instances-table] tr[data-instance-id]").first).to_be_visible()
        expect(page.locator("[data-testid=cost-total]")).to_have_text(re.compile(r"[1-9]"))
        shoot(page, "cluster")

        page.goto(f"{url}/jobs")
        jobs = page.locator("[data-testid=jobs-table] tr[data-job-id]")
        expect(jobs).to_have_count(2, timeout=SLOW_MS)  # one running, one queued behind it on static-1
        expect(jobs.locator("td[data-col=reason]").filter(has_text=re.compile(r"slot"))).to_have_count(1)
        shoot(page, "jobs")
    finally:
        for exp_id in running:
            c.master.api("POST", f"/api/v1/experiments/{exp_id}/kill")
