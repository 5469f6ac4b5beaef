"""The real det CLI (determined==0.38.1) editing workspaces and projects on a pedl master: workspace
create with a checkpoint storage file, edit (rename, storage, reset), archive/unarchive, delete; project
archive/unarchive and delete; each effect checked through the API, refusals leaving things as they were."""

from __future__ import annotations

import json

import pytest

from tests.compat.test_det_cli import DET, det
from tests.e2e.conftest import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.e2e]


@pytest.fixture(scope="module")
def ws_cluster(tmp_path_factory):
    if not DET.exists():
        pytest.skip(f"determined==0.38.1 is not installed at {DET}")
    c = Cluster(tmp_path_factory.mktemp("det-workspaces"), None).start()
    yield c
    c.stop()


def test_det_edits_archives_and_deletes_workspaces(ws_cluster, tmp_path) -> None:
    c = ws_cluster
    api = c.master.api
    storage = {"type": "shared_fs", "host_path": str(c.ckpts / "team")}
    path = tmp_path / "storage.json"
    path.write_text(json.dumps(storage))
    det(c, "workspace", "create", "det-team", "--checkpoint-storage-config-file", str(path))
    [ws] = api("GET", "/api/v1/workspaces", name="det-team")["workspaces"]
    assert ws["checkpointStorageConfig"] == storage
    assert json.loads(det(c, "workspace", "describe", "det-team", "--json").stdout)["id"] == ws["id"]

    det(c, "workspace", "edit", "det-team", "--name", "det-renamed")
    assert api("GET", f"/api/v1/workspaces/{ws['id']}")["workspace"]["name"] == "det-renamed"
    outside = det(
        c,
        "workspace",
        "edit",
        "det-renamed",
        "--checkpoint-storage-config",
        json.dumps({"type": "shared_fs", "host_path": "/etc"}),
        check=False,
    )
    assert outside.returncode != 0 and "checkpointStorageConfig.host_path" in outside.stderr
    assert api("GET", f"/api/v1/workspaces/{ws['id']}")["workspace"]["checkpointStorageConfig"] == storage
    det(c, "workspace", "edit", "det-renamed", "--checkpoint-storage-config", "{}")
    assert api("GET", f"/api/v1/workspaces/{ws['id']}")["workspace"].get("checkpointStorageConfig") is None

    det(c, "project", "create", "det-renamed", "det-proj")
    det(c, "workspace", "archive", "det-renamed")
    shown = api("GET", f"/api/v1/workspaces/{ws['id']}")["workspace"]
    assert shown["archived"]
    refused = det(c, "project", "create", "det-renamed", "det-proj-2", check=False)
    assert refused.returncode != 0 and "archived" in refused.stderr
    det(c, "workspace", "unarchive", "det-renamed")
    assert not api("GET", f"/api/v1/workspaces/{ws['id']}")["workspace"]["archived"]

    other = det(c, "workspace", "archive", "Uncategorized", check=False)  # det's user did not create it
    assert other.returncode != 0 and "owner or an admin" in other.stderr
    default = det(c, "-u", "admin", "workspace", "archive", "Uncategorized", check=False, stdin="\n")
    assert default.returncode != 0 and "default workspace" in default.stderr
    assert not api("GET", "/api/v1/workspaces/1")["workspace"]["archived"]
    out = det(c, "workspace", "delete", "det-renamed", "--yes").stdout
    assert "Successfully deleted workspace det-renamed" in out
    assert api("GET", "/api/v1/workspaces", name="det-renamed")["workspaces"] == []


def test_det_archives_and_deletes_projects(ws_cluster) -> None:
    c = ws_cluster
    api = c.master.api
    det(c, "workspace", "create", "det-projects")
    det(c, "project", "create", "det-projects", "det-archived")
    [ws] = api("GET", "/api/v1/workspaces", name="det-projects")["workspaces"]
    [proj] = api("GET", f"/api/v1/workspaces/{ws['id']}/projects")["projects"]
    det(c, "project", "archive", "det-projects", "det-archived")
    assert api("GET", f"/api/v1/projects/{proj['id']}")["project"]["archived"]
    det(c, "project", "unarchive", "det-projects", "det-archived")
    assert not api("GET", f"/api/v1/projects/{proj['id']}")["project"]["archived"]
    out = det(c, "project", "delete", "det-projects", "det-archived", "--yes").stdout
    assert "Successfully deleted project det-archived" in out
    assert api("GET", f"/api/v1/workspaces/{ws['id']}/projects")["projects"] == []
