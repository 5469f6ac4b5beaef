"""The real det CLI (0.38.1) runs notebooks on a pedl cluster (a master and a local agent, real
processes, a real JupyterLab): det notebook start waits until Jupyter answers through the master's
proxy and prints its address, det notebook start -d / list / kill manage one in the background."""

from __future__ import annotations

import re

import httpx
import pytest

from pedl.devcluster import wait_for
from tests.compat.test_det_cli import DET, det, ended
from tests.e2e.conftest import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]

pytest.importorskip("jupyterlab", reason="jupyterlab is in the test extra (pyproject.toml)")


@pytest.fixture(scope="module")
def nb_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    c = Cluster(tmp_path_factory.mktemp("det-notebooks"), None).start()
    c.add_agent("nb-agent-1", slots=1)
    yield c
    c.stop()


def _state(c: Cluster, nb_id: str) -> str:
    return c.master.api("GET", f"/api/v1/notebooks/{nb_id}")["notebook"]["state"]


def test_det_notebook_start_waits_until_jupyter_answers(nb_cluster) -> None:
    c = nb_cluster
    out = det(c, "notebook", "start", "--no-browser", "--config", "resources.slots=0").stdout
    assert "Jupyter Notebook is running at" in out, out
    found = re.search(r"/proxy/([0-9a-f-]{36})/", out)
    assert found, out
    nb_id = found.group(1)
    assert nb_id in det(c, "notebook", "list", "-q").stdout
    # ready means Jupyter answers through the proxy, with the token the master adds
    r = httpx.get(f"{c.master.url}/proxy/{nb_id}/api/status", headers={"Authorization": f"Bearer {c.master.token()}"})
    assert r.status_code == 200 and "started" in r.json(), r.text
    det(c, "notebook", "kill", nb_id)
    wait_for(lambda: _state(c, nb_id) == "STATE_TERMINATED", 60, what="the notebook to end")


def test_det_notebook_start_detached_list_and_kill(nb_cluster) -> None:
    c = nb_cluster
    nb_id = det(c, "notebook", "start", "-d", "--config", "resources.slots=0").stdout.strip()
    assert nb_id in det(c, "notebook", "list", "-q").stdout
    listed = det(c, "notebook", "list").stdout
    assert nb_id in listed and "JupyterLab (" in listed, listed
    wait_for(
        lambda: c.master.api("GET", f"/api/v1/notebooks/{nb_id}")["notebook"]["isReady"],
        120,
        what="the notebook to be ready",
    )
    det(c, "notebook", "kill", nb_id)
    wait_for(lambda: ended(c, "notebooks", nb_id), timeout=60, what="the notebook to end")
    assert _state(c, nb_id) == "STATE_TERMINATED"
