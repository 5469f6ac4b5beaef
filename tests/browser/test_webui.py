"""The WebUI in Debian's chromium against a real master and agent, through the DOM contract of
docs/webui.md: logging in, live experiment and trial pages, actions and their refusal, the cluster
page, unknown pages and a master that goes away and comes back."""

from __future__ import annotations

import io
import json
import re
import tarfile
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from pedl.devcluster import agent_connected, wait_experiment, wait_for
from tests.browser.conftest import (
    PRICE_PER_HOUR,
    SLOW_MS,
    create_user,
    login,
    registered_instances,
)
from tests.e2e.conftest import Cluster, steps_config

try:
    from playwright.sync_api import expect
except ImportError:  # the conftest skips these tests (fails them under CI), saying how to install it
    expect = None

pytestmark = [pytest.mark.browser, pytest.mark.e2e]


def state_re(states: str) -> re.Pattern:
    """A cell or badge that shows exactly one of `states` (`A|B`), as STATE_A, A or A in any case."""
    return re.compile(rf"^\s*(STATE_)?({states})\s*$", re.I)


def exp_state(c: Cluster, exp_id: int) -> str:
    return c.master.api("GET", f"/api/v1/experiments/{exp_id}")["experiment"]["state"]


def wait_state(c: Cluster, exp_id: int, state: str, timeout: float = 60) -> None:
    wait_for(lambda: exp_state(c, exp_id) == state, timeout, interval=0.3, what=f"experiment {exp_id} {state}")


# an active experiment is reported by how far its trials got, as Determined 0.38.1 does
ACTIVE = {"STATE_ACTIVE", "STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING"}


def wait_active(c: Cluster, exp_id: int, timeout: float = 60) -> None:
    wait_for(lambda: exp_state(c, exp_id) in ACTIVE, timeout, interval=0.3, what=f"experiment {exp_id} active")


def first_trial(c: Cluster, exp_id: int) -> dict:
    return wait_for(lambda: c.trials(exp_id)[0], 60, what=f"experiment {exp_id}'s first trial")


def kill(c: Cluster, exp_id: int) -> None:
    c.master.api("POST", f"/api/v1/experiments/{exp_id}/kill")


def confirm(page) -> None:
    dialog = page.locator("[data-testid=confirm]")
    expect(dialog).to_be_visible()
    dialog.locator("[data-testid=confirm-yes]").click()
    expect(dialog).to_be_hidden()


def long_experiment(c: Cluster, name: str) -> int:
    """An experiment that runs far longer than any test waits on it; the test kills it."""
    return c.create(steps_config(name=name, steps=2000, delay=0.5, ckpt_every=1000))


@pytest.fixture(scope="module")
def grid(cluster: Cluster) -> tuple[int, list[dict]]:
    """A completed grid experiment of two trials: one validates every 2 steps (5 points), the other
    every 5 (2 points), each with a checkpoint at each validation."""
    cfg = steps_config(name="grid", steps=10)
    cfg["hyperparameters"]["ckpt_every"] = {"type": "categorical", "vals": [2, 5]}
    cfg["searcher"]["name"] = "grid"
    exp_id = cluster.create(cfg)
    exp = wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED", "STATE_ERROR", "STATE_CANCELED"})
    assert exp["state"] == "STATE_COMPLETED", exp
    trials = sorted(cluster.trials(exp_id), key=lambda t: t["id"])
    assert len(trials) == 2
    return exp_id, trials


# -- logging in ----------------------------------------------------------------------------------


def test_log_in_and_out(cluster: Cluster, page) -> None:
    url = cluster.master.url
    page.goto(f"{url}/login")
    page.locator("input[name=username]").fill("determined")
    page.locator("input[name=password]").fill("not-the-password")
    page.locator("button[type=submit]").click()
    expect(page.locator("[data-testid=login-error]")).to_be_visible()
    expect(page).to_have_url(re.compile(r"/login"))

    login(page, url, "determined")
    nav = page.locator("[data-testid=nav]")
    for name in ("Experiments", "Cluster", "Job queue"):
        expect(nav.get_by_role("link", name=re.compile(name, re.I))).to_be_visible()
    page.goto(f"{url}/")
    expect(page).to_have_url(re.compile(r"/experiments(\?.*)?$"))
    expect(page.locator("[data-testid=experiments-table]")).to_be_visible()

    page.locator("[data-testid=logout]").click()
    expect(page).to_have_url(re.compile(r"/login"))
    assert not [c for c in page.context.cookies() if c["name"] == "pedl_session"]
    page.goto(f"{url}/experiments")
    expect(page).to_have_url(re.compile(r"/login\?"))


def test_a_logged_out_browser_goes_to_login_and_back_to_the_asked_page(cluster: Cluster, page, grid) -> None:
    exp_id, _ = grid
    asked = f"/experiments/{exp_id}"
    page.goto(f"{cluster.master.url}{asked}")
    expect(page).to_have_url(re.compile(r"/login\?"))
    assert parse_qs(urlparse(page.url).query).get("redirect") == [asked], page.url
    page.locator("input[name=username]").fill("determined")
    page.locator("input[name=password]").fill("")
    page.locator("button[type=submit]").click()
    expect(page).to_have_url(f"{cluster.master.url}{asked}")
    expect(page.locator("[data-testid=experiment-header]")).to_be_visible()
    session = [c for c in page.context.cookies() if c["name"] == "pedl_session"]
    assert session and session[0]["httpOnly"] and session[0]["sameSite"] == "Strict", session


# -- experiments ---------------------------------------------------------------------------------


def test_a_running_experiment_appears_in_the_list_and_completes_without_a_reload(cluster: Cluster, page) -> None:
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/experiments")
    expect(page.locator("[data-testid=experiments-table]")).to_be_visible()
    page.evaluate("window.__sameDocument = true")  # gone if the page reloads
    exp_id = cluster.create(steps_config(name="live-list", steps=40, delay=0.25))

    row = page.locator(f"tr[data-experiment-id='{exp_id}']")
    expect(row).to_be_visible()
    expect(row.locator("td[data-col=name]")).to_contain_text("live-list")
    expect(row.locator("td[data-col=user]")).to_contain_text("determined")
    expect(row.locator("td[data-col=state]")).to_have_text(state_re("ACTIVE|QUEUED|STARTING|RUNNING"))
    expect(row.locator("td[data-col=state]")).to_have_text(state_re("COMPLETED"), timeout=SLOW_MS)
    assert exp_state(cluster, exp_id) == "STATE_COMPLETED"
    assert page.evaluate("window.__sameDocument") is True, "the experiments page reloaded"


def validation_counts(c: Cluster, trials: list[dict]) -> dict[str, int]:
    """Each trial's number of validation_loss points, as the API reports them."""
    counts = {}
    for t in trials:
        rows = c.master.api("GET", f"/api/v1/trials/{t['id']}/metrics", group="validation")["metrics"]
        counts[str(t["id"])] = sum(1 for r in rows if "validation_loss" in r["metrics"])
    return counts


def test_learning_curves_hold_each_trials_points(cluster: Cluster, page, grid) -> None:
    exp_id, trials = grid
    expected = validation_counts(cluster, trials)
    assert sorted(expected.values()) == [2, 5]
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/experiments/{exp_id}")
    expect(page.locator("[data-testid=experiment-state]")).to_have_text(state_re("COMPLETED"))
    table = page.locator("[data-testid=trials-table]")
    for t in trials:
        expect(table.locator(f"tr[data-trial-id='{t['id']}']")).to_be_visible()

    curves = page.locator("[data-testid=learning-curves]")
    expect(curves).to_have_attribute("data-points", re.compile(r"\{.*\}"))
    try:
        page.wait_for_function(
            """([sel, want]) => {
                   const el = document.querySelector(sel);
                   if (!el) return false;
                   let got;
                   try { got = JSON.parse(el.dataset.points); } catch { return false; }
                   const keys = Object.keys(want).sort();
                   return JSON.stringify(Object.keys(got).sort()) === JSON.stringify(keys)
                       && keys.every(k => got[k] === want[k]);
               }""",
            arg=["[data-testid=learning-curves]", expected],
        )
    except Exception as exc:  # say what was drawn instead of a bare timeout
        drawn = curves.get_attribute("data-points")
        raise AssertionError(f"learning curves drew {drawn}, the API has {json.dumps(expected)} points") from exc


def test_a_trials_logs_follow_it_while_it_prints(cluster: Cluster, page) -> None:
    exp_id = cluster.create(steps_config(name="logs", steps=60, delay=0.5, ckpt_every=30))
    trial = first_trial(cluster, exp_id)
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/trials/{trial['id']}")
    expect(page.locator("[data-testid=trial-header]")).to_be_visible()
    page.locator("[data-testid=log-follow]").check()

    lines = page.locator("[data-testid=trial-logs] .log-line")
    expect(lines.filter(has_text=re.compile(r"\bstep 2 pid \d+"))).to_have_count(1, timeout=SLOW_MS)
    assert lines.filter(has_text=re.compile(r"\bstep 60 pid")).count() == 0, "the trial had already ended"
    assert exp_state(cluster, exp_id) in ACTIVE
    expect(lines.filter(has_text=re.compile(r"\bstep 60 pid \d+"))).to_have_count(1, timeout=SLOW_MS)
    steps = [int(m.group(1)) for text in lines.all_inner_texts() if (m := re.search(r"\bstep (\d+) pid", text))]
    assert steps == list(range(1, 61)), f"each step's line once, in order; got {steps}"
    wait_experiment(cluster.master, exp_id, {"STATE_COMPLETED"})


def test_a_checkpoint_downloads_from_the_trial_page(cluster: Cluster, page, grid, tmp_path: Path) -> None:
    _, trials = grid
    trial = next(t for t in trials if t["hparams"]["ckpt_every"] == 5)
    ckpts = cluster.master.api("GET", "/api/v1/checkpoints", trialId=trial["id"])["checkpoints"]
    assert len(ckpts) == 2
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/trials/{trial['id']}")
    rows = page.locator("[data-testid=checkpoints-table] tr[data-checkpoint-uuid]")
    expect(rows).to_have_count(len(ckpts))
    assert {r.get_attribute("data-checkpoint-uuid") for r in rows.all()} == {c["uuid"] for c in ckpts}

    last = max(ckpts, key=lambda c: c["metadata"]["steps_completed"])
    row = page.locator(f"[data-testid=checkpoints-table] tr[data-checkpoint-uuid='{last['uuid']}']")
    with page.expect_download() as got:
        row.locator("a[data-testid=checkpoint-download]").click()
    path = tmp_path / "checkpoint.tar"
    got.value.save_as(path)
    with tarfile.open(path) as tar:
        names = {n.removeprefix("./") for n in tar.getnames()}
        assert "state.json" in names, names
        member = next(m for m in tar.getmembers() if m.name.removeprefix("./") == "state.json")
        state = json.load(io.TextIOWrapper(tar.extractfile(member)))
    assert state == {"step": 10}


# -- actions -------------------------------------------------------------------------------------


def test_pause_and_activate_from_the_ui(cluster: Cluster, page) -> None:
    exp_id = long_experiment(cluster, "pause-me")
    try:
        login(page, cluster.master.url, "determined")
        page.goto(f"{cluster.master.url}/experiments/{exp_id}")
        badge = page.locator("[data-testid=experiment-state]")
        expect(badge).to_have_text(state_re("ACTIVE|QUEUED|STARTING|RUNNING"))

        page.locator("button[data-action=pause]").first.click()  # asked, then declined
        expect(page.locator("[data-testid=confirm]")).to_be_visible()
        page.locator("[data-testid=confirm-no]").click()
        expect(page.locator("[data-testid=confirm]")).to_be_hidden()
        assert exp_state(cluster, exp_id) in ACTIVE

        page.locator("button[data-action=pause]").first.click()
        confirm(page)
        wait_state(cluster, exp_id, "STATE_PAUSED")
        expect(badge).to_have_text(state_re("PAUSED"))

        page.locator("button[data-action=activate]").first.click()
        confirm(page)
        wait_active(cluster, exp_id)
        expect(badge).to_have_text(state_re("ACTIVE|QUEUED|STARTING|RUNNING"))
    finally:
        kill(cluster, exp_id)


def test_another_users_pause_is_refused_with_a_toast(cluster: Cluster, page) -> None:
    other = f"bob-{uuid.uuid4().hex[:6]}"
    create_user(cluster, other, "pw-bob")
    exp_id = long_experiment(cluster, "not-bobs")  # determined's
    try:
        login(page, cluster.master.url, other, "pw-bob")
        page.goto(f"{cluster.master.url}/experiments/{exp_id}")
        expect(page.locator("[data-testid=experiment-state]")).to_have_text(state_re("ACTIVE|QUEUED|STARTING|RUNNING"))
        page.locator("button[data-action=pause]").first.click()
        confirm(page)
        toast = page.locator("[data-testid=toast-error]")
        expect(toast).to_be_visible()
        expect(toast).to_contain_text(re.compile(r"owner|forbidden|403", re.I))  # the master's reason
        assert exp_state(cluster, exp_id) in ACTIVE
        expect(page.locator("[data-testid=experiment-state]")).to_have_text(state_re("ACTIVE|QUEUED|STARTING|RUNNING"))
    finally:
        kill(cluster, exp_id)


# -- the cluster page ----------------------------------------------------------------------------


def number_in(text: str) -> float:
    m = re.search(r"\d[\d,]*(?:\.\d+)?", text)
    assert m, f"no number in {text!r}"
    return float(m.group(0).replace(",", ""))


def test_the_cluster_page_shows_an_agent_and_a_dynamic_instance_with_its_cost(dynamic_cluster: Cluster, page) -> None:
    c = dynamic_cluster
    (inst,) = registered_instances(c)
    login(page, c.master.url, "determined")
    page.goto(f"{c.master.url}/cluster")
    agents = page.locator("[data-testid=agents-table]")
    expect(agents.locator("tr[data-agent-id='static-1']")).to_be_visible()
    expect(agents.locator(f"tr[data-agent-id='{inst['id']}']")).to_be_visible()
    pools = page.locator("[data-testid=pools-table]")
    expect(pools.locator("tr[data-pool='default']")).to_be_visible()
    expect(pools.locator("tr[data-pool='dynamic']")).to_be_visible()

    row = page.locator(f"[data-testid=instances-table] tr[data-instance-id='{inst['id']}']")
    expect(row).to_be_visible()
    cost = row.locator("td[data-col=cost]")
    expect(cost).to_have_text(re.compile(r"[1-9]"))  # a price of $360/h shows a non-zero cost at once
    shown = number_in(cost.inner_text())
    (now,) = registered_instances(c)
    assert 0 < shown <= now["cost"] + 0.01, f"the page shows {shown}, the API {now['cost']} at ${PRICE_PER_HOUR}/h"
    total = page.locator("[data-testid=cost-total]")
    expect(total).to_have_text(re.compile(r"[1-9]"))
    assert number_in(total.inner_text()) >= shown - 0.01


# -- unknown pages and a master that goes away ---------------------------------------------------


def test_a_deep_link_to_an_unknown_experiment_shows_not_found(cluster: Cluster, page) -> None:
    login(page, cluster.master.url, "determined")
    for path in ("/experiments/987654", "/trials/987654", "/no/such/page"):
        page.goto(f"{cluster.master.url}{path}")
        expect(page.locator("[data-testid=not-found]")).to_be_visible()
        expect(page).to_have_url(f"{cluster.master.url}{path}")


def test_the_master_going_away_shows_a_banner_until_it_is_back(cluster: Cluster, page) -> None:
    """Last in this module: it restarts the module's master."""
    login(page, cluster.master.url, "determined")
    page.goto(f"{cluster.master.url}/experiments")
    expect(page.locator("[data-testid=experiments-table]")).to_be_visible()
    banner = page.locator("[data-testid=master-down]")
    expect(banner).to_be_hidden()
    page.evaluate("window.__sameDocument = true")

    cluster.master.kill()
    try:
        expect(banner).to_be_visible()
    finally:
        cluster.master.start()
    expect(banner).to_be_hidden(timeout=60_000)
    exp_id = cluster.create(steps_config(name="after-restart", steps=2), activate=False)
    expect(page.locator(f"tr[data-experiment-id='{exp_id}']")).to_be_visible()  # polling resumed
    assert page.evaluate("window.__sameDocument") is True, "the page reloaded"
    wait_for(lambda: agent_connected(cluster.master, "agent-1"), 60, what="agent-1 to reconnect")
