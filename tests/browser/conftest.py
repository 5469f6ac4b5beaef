"""Browser tests: Debian's chromium (never a browser download) driven by Playwright's sync API against
a real master that serves the WebUI built by `make webui`. Without chromium, Playwright or the built
UI they skip, saying how to get it, except under CI (`CI` set), where they fail: a skipped suite hides
regressions (the pattern of tests/compat/conftest.py).

Fixtures: `browser` (one headless chromium per session), `page` (a fresh context and page per test),
`cluster` (a master and one static agent per module) and `dynamic_cluster` (the same plus a pool of
dynamic local instances, for the cluster page)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from pedl.devcluster import wait_for
from tests.e2e.conftest import Cluster

REPO = Path(__file__).parents[2]
CHROMIUM_ENV = "PEDL_CHROMIUM"  # another chromium binary than Debian's /usr/bin/chromium
WEBUI_INDEX = REPO / "src" / "pedl" / "webui" / "static" / "index.html"
VIEWPORT = {"width": 1400, "height": 900}
TIMEOUT_MS = 30_000  # the default for every Playwright action and expect(); a 2-core machine is slow
SLOW_MS = 180_000  # for what waits on a trial to run to its end


def chromium_path() -> Path:
    return Path(os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium")


def browser_missing() -> str | None:
    """None when Playwright and chromium are installed, else what is missing and how to install it."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed in this venv (install the test extras: make install-test)"
    if not chromium_path().exists():
        return (
            f"chromium is missing at {chromium_path()} (install Debian's chromium: make chromium, "
            f"or sudo apt-get install chromium; or point {CHROMIUM_ENV} at a chromium binary)"
        )
    return None


def webui_missing() -> str | None:
    """None when the WebUI is built, else how to build it."""
    if WEBUI_INDEX.exists():
        return None
    return f"the WebUI is not built: {WEBUI_INDEX} is missing (build it with: make webui)"


def skip_or_fail(missing: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{missing}. Under CI the browser tests must run, not skip.", pytrace=False)
    pytest.skip(missing)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("browser") is None:
        return
    missing = browser_missing()
    if missing is None and "webui" in getattr(item, "fixturenames", ()):
        missing = webui_missing()
    if missing is not None:
        skip_or_fail(missing)


# -- the browser ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Per module: Playwright's sync API keeps an asyncio loop running in this thread while it is
    open, and every asyncio test that the same process runs meanwhile fails ("Cannot run the event
    loop while another loop is running"). `make test` also runs the browser tests in a pass of their
    own."""
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=TIMEOUT_MS)
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(chromium_path()), headless=True)
        yield b
        b.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Any:
    report = yield
    if report.when == "call":
        item.stash[FAILED] = report.failed
    return report


FAILED = pytest.StashKey[bool]()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """A page in a context of its own (no cookies shared between tests). When the test fails, what
    the page logged to the console, its failed requests and the text it showed are printed, and a
    screenshot is saved next to the test's tmp_path."""
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(TIMEOUT_MS)
    pg = context.new_page()
    console: list[str] = []
    pg.on("console", lambda msg: console.append(f"[{msg.type}] {msg.text}"))
    pg.on("pageerror", lambda exc: console.append(f"[pageerror] {exc}"))
    pg.on(
        "response",
        lambda r: console.append(f"[http {r.status}] {r.request.method} {r.url}") if r.status >= 400 else None,
    )
    pg.on("requestfailed", lambda r: console.append(f"[request failed] {r.method} {r.url}: {r.failure}"))
    yield pg
    if request.node.stash.get(FAILED, False):
        print("browser console:\n" + "\n".join(dict.fromkeys(console[-200:])))  # each message once
        try:
            print(f"the page at {pg.url} showed:\n{pg.locator('body').inner_text(timeout=5000)[-3000:]}")
            pg.screenshot(path=str(tmp_path / "failure.png"))
            print(f"screenshot: {tmp_path / 'failure.png'}")
        except Exception as exc:  # a diagnostic only
            print(f"no page text or screenshot: {exc}")
    context.close()


def login(page: Any, base_url: str, user: str, password: str = "") -> None:
    """Log in through the login page and wait until the app shows who is logged in."""
    from playwright.sync_api import expect

    page.goto(f"{base_url}/login")
    page.locator("input[name=username]").fill(user)
    page.locator("input[name=password]").fill(password)
    page.locator("button[type=submit]").click()
    expect(page).not_to_have_url(re.compile(r"/login"))
    expect(page.locator("[data-testid=whoami]")).to_contain_text(user)


# -- clusters ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def webui() -> Path:
    """The built UI; a test that needs it (through a cluster fixture) skips without it (see above)."""
    return WEBUI_INDEX


def _start(work: Path, config: dict | None, agents: dict[str, int]) -> Cluster:
    c = Cluster(work, None, config)
    try:
        c.start()
        for agent_id, slots in agents.items():
            c.add_agent(agent_id, slots=slots)
    except BaseException:
        c.stop()
        raise
    return c


@pytest.fixture(scope="module")
def cluster(webui: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master (SQLite) and one static agent with two slots, shared by the tests of a module."""
    c = _start(tmp_path_factory.mktemp("browser-cluster"), None, {"agent-1": 2})
    yield c
    c.stop()


DYNAMIC_POOL = "dynamic"
PRICE_PER_HOUR = 360.0  # ten cents a second: the cost shows within a few seconds


def dynamic_config() -> dict:
    """A static pool (`default`) and a pool of local instances that keeps one running, with a price."""
    provider = {
        "type": "local",
        "slots_per_instance": 1,
        "min_instances": 1,
        "max_instances": 1,
        "boot_delay": "0.5s",
        "max_idle_agent_period": "10m",
        "price_per_hour": PRICE_PER_HOUR,
    }
    return {"resource_pools": [{"pool_name": "default"}, {"pool_name": DYNAMIC_POOL, "provider": provider}]}


@pytest.fixture(scope="module")
def dynamic_cluster(webui: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    """A master with a static agent in `default` and one registered local instance in `dynamic`."""
    c = _start(tmp_path_factory.mktemp("browser-dynamic"), dynamic_config(), {"static-1": 1})
    try:
        wait_for(lambda: registered_instances(c), 90, what="the dynamic pool's local instance to register")
    except BaseException:
        c.stop()
        raise
    yield c
    c.stop()


def registered_instances(c: Cluster) -> list[dict]:
    got = c.master.api("GET", "/api/v1/instances", all="false")["instances"]
    return [i for i in got if i["registeredAt"] is not None and i["resourcePool"] == DYNAMIC_POOL]


# -- users ---------------------------------------------------------------------------------------


def admin_api(c: Cluster, method: str, path: str, body: Any = None) -> Any:
    """A request as `admin` (blank password), whose bearer token the master's own client does not keep."""
    r = httpx.post(
        f"{c.master.url}/api/v1/auth/login", timeout=30, json={"username": "admin", "password": "", "isHashed": False}
    )
    r.raise_for_status()
    r = httpx.request(
        method,
        f"{c.master.url}{path}",
        timeout=30,
        content=None if body is None else json.dumps(body),
        headers={"Authorization": f"Bearer {r.json()['token']}"},
    )
    if r.status_code != 200:
        raise AssertionError(f"{method} {path} -> {r.status_code}: {r.text[:500]}")
    return r.json()


def create_user(c: Cluster, username: str, password: str, admin: bool = False) -> int:
    """A new user made by admin through POST /api/v1/users; its id."""
    body = {"user": {"username": username, "admin": admin, "active": True}, "password": password, "isHashed": False}
    return admin_api(c, "POST", "/api/v1/users", body)["user"]["id"]
