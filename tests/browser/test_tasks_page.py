"""The WebUI's Tasks page in Debian's chromium against a real master and agent: a running command is
listed (reached from the navigation) with its kind, description, owner and state, and killed from its
row; another user's kill is refused with a toast; Open is offered for one's own ready notebook only,
and opens a real JupyterLab through the master's proxy in a new tab."""

from __future__ import annotations

import re

import pytest

from pedl.devcluster import wait_for
from tests.browser.conftest import create_user, login
from tests.e2e.conftest import Cluster

try:
    from playwright.sync_api import expect
except ImportError:  # the conftest skips these tests (fails them under CI), saying how to install it
    expect = None

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def command_state(c: Cluster, cmd_id: str) -> str:
    return c.master.api("GET", f"/api/v1/commands/{cmd_id}")["command"]["state"]


def sleeper(c: Cluster, description: str) -> str:
    body = {"config": {"entrypoint": ["sh", "-c", "sleep 600"], "description": description}}
    cmd_id = c.master.api("POST", "/api/v1/commands", body)["command"]["id"]
    wait_for(lambda: command_state(c, cmd_id) == "STATE_RUNNING", 60, what=f"command {cmd_id} to run")
    return cmd_id


def test_a_running_command_is_listed_and_killed_from_the_tasks_page(cluster: Cluster, page) -> None:
    url = cluster.master.url
    cmd_id = sleeper(cluster, "browser sleeper")
    login(page, url, "determined")
    page.locator("[data-testid=nav]").get_by_role("link", name="Tasks").click()
    expect(page).to_have_url(re.compile(r"/task-list$"))
    row = page.locator(f"[data-testid=tasks-table] tr[data-task-id='{cmd_id}']")
    expect(row).to_have_attribute("data-kind", "command")
    expect(row.locator("td[data-col=description]")).to_have_text("browser sleeper")
    expect(row.locator("td[data-col=owner]")).to_have_text("determined")
    expect(row.locator("td[data-col=state]")).to_have_text(re.compile("running", re.I))
    expect(row.locator("td[data-col=ready]")).to_have_text("yes")
    expect(row.locator("[data-action=open]")).to_have_count(0)  # a command has no service to open

    row.locator("button[data-action=kill]").click()
    dialog = page.locator("[data-testid=confirm]")
    expect(dialog).to_contain_text(cmd_id[:8])
    dialog.locator("[data-testid=confirm-yes]").click()
    expect(row).to_have_count(0)  # ended tasks leave the list, without a reload
    assert command_state(cluster, cmd_id) == "STATE_TERMINATED"


def test_the_page_loads_at_its_address_and_refuses_another_users_kill(cluster: Cluster, page) -> None:
    url = cluster.master.url
    cmd_id = sleeper(cluster, "not yours")
    create_user(cluster, "mallory", "pw-mallory")
    login(page, url, "mallory", "pw-mallory")
    page.goto(f"{url}/task-list")
    row = page.locator(f"tr[data-task-id='{cmd_id}']")
    expect(row.locator("td[data-col=owner]")).to_have_text("determined")
    row.locator("button[data-action=kill]").click()
    page.locator("[data-testid=confirm-yes]").click()
    expect(page.locator("[data-testid=toast-error]")).to_contain_text(re.compile("kill", re.I))
    expect(row).to_have_count(1)
    assert command_state(cluster, cmd_id) == "STATE_RUNNING"
    cluster.master.api("POST", f"/api/v1/commands/{cmd_id}/kill")


def test_open_links_a_ready_notebook_of_ones_own_through_the_proxy(cluster: Cluster, page) -> None:
    """The lists answered by the test (the next test starts a real notebook): Open goes to /proxy/{id}/
    for the owner's ready notebook, and is not offered for another user's TensorBoard, whose proxy
    would refuse this session."""
    me = cluster.master.api("GET", "/api/v1/me")["user"]
    nb = {
        "id": "0b7e4c4e-1f0a-4d7b-9d5e-8f1c2a3b4c5d",
        "description": "JupyterLab (calmly-brave-owl)",
        "state": "STATE_RUNNING",
        "isReady": True,
        "username": me["username"],
        "userId": me["id"],
        "serviceAddress": "/proxy/0b7e4c4e-1f0a-4d7b-9d5e-8f1c2a3b4c5d/",
        "startTime": "2026-01-01T00:00:00Z",
    }
    tb_id = "9a8b7c6d-1f0a-4d7b-9d5e-8f1c2a3b4c5d"
    tb = {
        **nb,
        "id": tb_id,
        "description": "TensorBoard (Experiment 1)",
        "username": "someone",
        "userId": me["id"] + 100,
        "serviceAddress": f"/proxy/{tb_id}/",
    }
    page.route("**/api/v1/notebooks", lambda route: route.fulfill(json={"notebooks": [nb]}))
    page.route("**/api/v1/tensorboards", lambda route: route.fulfill(json={"tensorboards": [tb]}))
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/task-list")
    mine = page.locator(f"tr[data-task-id='{nb['id']}']")
    expect(mine).to_have_attribute("data-kind", "notebook")
    expect(mine.locator("a[data-action=open]")).to_have_attribute("href", nb["serviceAddress"])
    theirs = page.locator(f"tr[data-task-id='{tb['id']}']")
    expect(theirs).to_have_attribute("data-kind", "tensorboard")
    expect(theirs.locator("[data-action=open]")).to_have_count(0)
    expect(theirs.locator("button[data-action=kill]")).to_be_visible()


def test_open_shows_a_running_notebook_in_a_new_tab(cluster: Cluster, page) -> None:
    """A real JupyterLab behind the master's proxy, opened from its row with the WebUI's session."""
    nb_id = cluster.master.api("POST", "/api/v1/notebooks", {"config": {"resources": {"slots": 0}}})["notebook"]["id"]
    try:
        wait_for(
            lambda: cluster.master.api("GET", f"/api/v1/notebooks/{nb_id}")["notebook"]["isReady"],
            180,
            what="the notebook to be ready",
        )
        login(page, cluster.master.url, "determined")
        page.goto(f"{cluster.master.url}/task-list")
        row = page.locator(f"tr[data-task-id='{nb_id}']")
        expect(row).to_have_attribute("data-ready", "true")
        with page.context.expect_page() as opened:
            row.locator("a[data-action=open]").click()
        tab = opened.value
        tab.wait_for_load_state()
        assert tab.url.startswith(f"{cluster.master.url}/proxy/{nb_id}/"), tab.url
        expect(tab).to_have_title(re.compile("JupyterLab", re.I))
    finally:
        cluster.master.api("POST", f"/api/v1/notebooks/{nb_id}/kill")
