"""Workspaces as det edits them: PATCH (name, checkpoint storage), archive, pin, delete; launches into
an archived workspace refused; the default workspace refused (403 for others); nothing changed on a
refusal."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, file_entry, post


def workspace(client: TestClient, headers: dict, name: str, **extra: object) -> dict:
    r = post(client, "/api/v1/workspaces", {"name": name, **extra}, headers)
    assert r.status_code == 200, r.text
    return r.json()["workspace"]


def project(client: TestClient, headers: dict, ws: int, name: str) -> int:
    r = post(client, f"/api/v1/workspaces/{ws}/projects", {"name": name, "workspaceId": ws}, headers)
    assert r.status_code == 200, r.text
    return r.json()["project"]["id"]


def experiment(client: TestClient, headers: dict, project_id: int, config: str = SINGLE_CONFIG):
    return post(
        client,
        "/api/v1/experiments",
        {
            "activate": False,
            "config": config,
            "projectId": project_id,
            "modelDefinition": [file_entry("train.py", b"x\n")],
        },
        headers,
    )


def patch(client: TestClient, headers: dict, ws: int, body: dict):
    return client.patch(f"/api/v1/workspaces/{ws}", content=__import__("json").dumps(body), headers=headers)


def get(client: TestClient, headers: dict, ws: int) -> dict:
    return client.get(f"/api/v1/workspaces/{ws}", headers=headers).json()["workspace"]


def storage_root(app: FastAPI) -> str:
    return app.state.ctx.config.effective_checkpoint_storage().host_path.rstrip("/")


def test_patch_renames_and_a_taken_name_is_a_409(client: TestClient, user: dict, admin: dict) -> None:
    ws = workspace(client, user, "Vision")
    workspace(client, user, "Audio")
    # det sends the whole workspace back (v1PatchWorkspace.from_json of the v1Workspace), nulls included
    r = patch(client, user, ws["id"], {"name": "Sight", "checkpointStorageConfig": None, "agentUserGroup": None})
    assert r.status_code == 200, r.text
    assert r.json()["workspace"]["name"] == "Sight" == get(client, user, ws["id"])["name"]
    r = patch(client, admin, ws["id"], {"name": "audio"})
    assert r.status_code == 409 and "'audio'" in r.json()["message"], r.text
    for body, field in (
        ({"name": ""}, "name"),
        ({"defaultComputePool": "gpu"}, "defaultComputePool"),
        ({"name": 3}, "name"),
    ):
        r = patch(client, user, ws["id"], body)
        assert r.status_code == 400 and field in r.json()["message"], (body, r.text)
    assert get(client, user, ws["id"])["name"] == "Sight"


def test_only_its_creator_or_an_admin_edits_it_and_the_default_is_refused(
    client: TestClient, user: dict, admin: dict
) -> None:
    ws = workspace(client, admin, "Admins")
    for method, path in (("PATCH", ""), ("POST", "/archive"), ("POST", "/unarchive"), ("DELETE", "")):
        body = '{"name": "Mine"}' if method == "PATCH" else None
        r = client.request(method, f"/api/v1/workspaces/{ws['id']}{path}", content=body, headers=user)
        assert r.status_code == 403, (method, path, r.text)
        r = client.request(method, f"/api/v1/workspaces/1{path}", content=body, headers=user)
        # Uncategorized is the admin's; an edit of it is the 400 whoever asks, as in Determined
        assert r.status_code == (400 if method == "PATCH" else 403), (method, path, r.text)
        r = client.request(method, f"/api/v1/workspaces/1{path}", content=body, headers=admin)
        assert r.status_code == 400 and "default workspace" in r.json()["message"], (method, path, r.text)
    assert get(client, admin, ws["id"]) == ws
    assert get(client, user, 1)["name"] == "Uncategorized" and not get(client, user, 1)["archived"]
    assert client.delete("/api/v1/workspaces/99", headers=admin).status_code == 404


def test_archived_workspace_takes_no_edits_projects_or_experiments(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")
    pid = project(client, user, ws["id"], "Detection")
    assert post(client, f"/api/v1/workspaces/{ws['id']}/archive", None, user).status_code == 200
    assert post(client, f"/api/v1/workspaces/{ws['id']}/archive", None, user).status_code == 200  # a repeat
    assert get(client, user, ws["id"])["archived"]
    shown = client.get(f"/api/v1/projects/{pid}", headers=user).json()["project"]
    assert shown["archived"]  # archived with its workspace
    assert patch(client, user, ws["id"], {"name": "Other"}).status_code == 400
    r = post(client, f"/api/v1/workspaces/{ws['id']}/projects", {"name": "P2"}, user)
    assert r.status_code == 400 and "workspaceId" in r.json()["message"]
    r = experiment(client, user, pid)
    assert r.status_code == 400 and r.json()["message"].startswith("projectId") and "archived" in r.json()["message"]
    assert client.get("/api/v1/experiments", headers=user).json()["pagination"]["total"] == 0
    assert post(client, f"/api/v1/workspaces/{ws['id']}/unarchive", None, user).status_code == 200
    assert not client.get(f"/api/v1/projects/{pid}", headers=user).json()["project"]["archived"]
    assert experiment(client, user, pid).status_code == 200


def test_pins_are_each_users_own(client: TestClient, user: dict, admin: dict) -> None:
    ws = workspace(client, user, "Vision")
    assert ws["pinned"]

    def pinned(headers: dict) -> list[str]:
        return [w["name"] for w in client.get("/api/v1/workspaces?pinned=true", headers=headers).json()["workspaces"]]

    assert pinned(user) == ["Vision"] and pinned(admin) == []
    assert post(client, f"/api/v1/workspaces/{ws['id']}/unpin", None, user).status_code == 200
    assert post(client, f"/api/v1/workspaces/{ws['id']}/pin", None, admin).status_code == 200
    assert post(client, f"/api/v1/workspaces/{ws['id']}/pin", None, admin).status_code == 200  # a repeat
    assert pinned(user) == [] and pinned(admin) == ["Vision"]
    assert post(client, "/api/v1/workspaces/99/pin", None, user).status_code == 404


def test_checkpoint_storage_is_checked_kept_reset_and_used_by_its_experiments(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    root = storage_root(app)
    ws = workspace(client, user, "Vision", checkpointStorageConfig={"type": "shared_fs", "host_path": root + "/ws"})
    assert ws["checkpointStorageConfig"] == {"type": "shared_fs", "host_path": root + "/ws"}
    pid = project(client, user, ws["id"], "Detection")
    exp = experiment(client, user, pid).json()["experiment"]
    assert exp["config"]["checkpoint_storage"]["host_path"] == root + "/ws"
    own = SINGLE_CONFIG + f"checkpoint_storage: {{host_path: {root}/own}}\n"
    assert (
        experiment(client, user, pid, own).json()["experiment"]["config"]["checkpoint_storage"]["host_path"]
        == root + "/own"
    )  # the experiment's own storage wins
    # outside the master's roots, or malformed: 400 naming the field, nothing changed
    for given, field in (
        ({"type": "shared_fs", "host_path": "/etc"}, "checkpointStorageConfig.host_path"),
        ({"type": "shared_fs", "host_path": root + "/../.."}, "checkpointStorageConfig.host_path"),
        ({"type": "shared_fs", "bucket": "b"}, "checkpointStorageConfig"),
        ({"type": "azure"}, "checkpointStorageConfig"),
        ([], "checkpointStorageConfig"),
    ):
        r = patch(client, user, ws["id"], {"checkpointStorageConfig": given})
        assert r.status_code == 400 and r.json()["message"].startswith(field), (given, r.text)
        r = post(client, "/api/v1/workspaces", {"name": "Bad", "checkpointStorageConfig": given}, user)
        assert r.status_code == 400 and r.json()["message"].startswith(field), (given, r.text)
    assert get(client, user, ws["id"])["checkpointStorageConfig"]["host_path"] == root + "/ws"
    assert [w["name"] for w in client.get("/api/v1/workspaces", headers=user).json()["workspaces"]] == [
        "Uncategorized",
        "Vision",
    ]
    # {} resets it (det's test_reset_workspace_checkpoint_storage_conf); null leaves it
    assert (
        patch(client, user, ws["id"], {"checkpointStorageConfig": None}).json()["workspace"]["checkpointStorageConfig"]
        is not None
    )
    r = patch(client, user, ws["id"], {"checkpointStorageConfig": {}})
    assert r.status_code == 200 and r.json()["workspace"]["checkpointStorageConfig"] is None
    assert experiment(client, user, pid).json()["experiment"]["config"]["checkpoint_storage"]["host_path"] == root


def test_delete_takes_its_projects_and_ended_experiments(client: TestClient, user: dict, admin: dict) -> None:
    empty = workspace(client, user, "Empty")
    project(client, user, empty["id"], "P")
    r = client.delete(f"/api/v1/workspaces/{empty['id']}", headers=user)
    assert r.status_code == 200 and r.json() == {"completed": True}
    assert client.get(f"/api/v1/workspaces/{empty['id']}", headers=user).status_code == 404

    ws = workspace(client, user, "Vision")
    pid = project(client, user, ws["id"], "Detection")
    exp = experiment(client, user, pid).json()["experiment"]
    r = client.delete(f"/api/v1/workspaces/{ws['id']}", headers=user)  # a paused experiment: kept, and said why
    assert r.status_code == 400 and f"experiment {exp['id']}" in r.json()["message"], r.text
    assert get(client, user, ws["id"])["numProjects"] == 1
    assert client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()["experiment"]["state"] == "STATE_PAUSED"
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    r = client.delete(f"/api/v1/workspaces/{ws['id']}", headers=admin)
    assert r.status_code == 200 and r.json() == {"completed": False}  # the deletion worker takes the experiment
    assert client.get(f"/api/v1/workspaces/{ws['id']}", headers=user).status_code == 404
    assert client.get(f"/api/v1/projects/{pid}", headers=user).status_code == 404
    state = client.get(f"/api/v1/experiments/{exp['id']}", headers=user)
    assert state.status_code == 404 or state.json()["experiment"]["state"] == "STATE_DELETING"


def test_names_sort_whatever_their_case(client: TestClient, user: dict) -> None:
    """det's test_workspace_org: _TestPatched, _TestWS, Uncategorized (and _TestEarly, _TestPatchedProject,
    _TestPRJ for projects) on both databases."""
    for name in ("_TestWS", "_TestPatched"):
        workspace(client, user, name)
    listed = client.get("/api/v1/workspaces?sortBy=SORT_BY_NAME", headers=user).json()["workspaces"]
    assert [w["name"] for w in listed] == ["_TestPatched", "_TestWS", "Uncategorized"]
    ws = listed[0]["id"]
    for name in ("_TestPRJ", "_TestPatchedProject", "_TestEarly"):
        project(client, user, ws, name)
    listed = client.get(f"/api/v1/workspaces/{ws}/projects?sortBy=SORT_BY_NAME", headers=user).json()["projects"]
    assert [p["name"] for p in listed] == ["_TestEarly", "_TestPatchedProject", "_TestPRJ"]


def test_delete_takes_its_registered_models(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Models")
    r = post(client, "/api/v1/models", {"name": "in-ws", "labels": ["l"], "workspaceId": ws["id"]}, user)
    assert r.status_code == 200, r.text
    assert post(client, "/api/v1/models", {"name": "elsewhere"}, user).status_code == 200
    assert client.delete(f"/api/v1/workspaces/{ws['id']}", headers=user).json() == {"completed": True}
    names = [m["name"] for m in client.get("/api/v1/models", headers=user).json()["models"]]
    assert names == ["elsewhere"]
