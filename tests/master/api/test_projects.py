"""Projects over the API: create in a workspace, list with counts, get; experiments created into a
project (projectId, or the config's workspace and project) and listed by project."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import SINGLE_CONFIG, file_entry, post

# what det's bindings require of a v1Project (determined 0.38.1, bindings.py)
V1_PROJECT = {
    "archived",
    "errorMessage",
    "id",
    "immutable",
    "key",
    "name",
    "notes",
    "numActiveExperiments",
    "numExperiments",
    "numRuns",
    "state",
    "userId",
    "username",
    "workspaceId",
}


def workspace(client: TestClient, headers: dict, name: str) -> int:
    r = post(client, "/api/v1/workspaces", {"name": name}, headers)
    assert r.status_code == 200, r.text
    return r.json()["workspace"]["id"]


def project(client: TestClient, headers: dict, ws: int, name: str, **extra: object):
    return post(client, f"/api/v1/workspaces/{ws}/projects", {"name": name, "workspaceId": ws, **extra}, headers)


def experiment(client: TestClient, headers: dict, config: str = SINGLE_CONFIG, **body: object):
    return post(
        client,
        "/api/v1/experiments",
        {
            "activate": False,
            "config": config,
            "parentId": None,
            "modelDefinition": [file_entry("train.py", b"x\n")],
            "validateOnly": False,
            "template": None,
            **body,
        },
        headers,
    )


def count_experiments(client: TestClient, headers: dict) -> int:
    return client.get("/api/v1/experiments", headers=headers).json()["pagination"]["total"]


def test_create_and_get_a_project_with_every_key_det_needs(client: TestClient, user: dict, admin: dict) -> None:
    ws = workspace(client, user, "Vision")
    r = project(client, user, ws, "Detection", description="boxes", key="det")
    assert r.status_code == 200, r.text
    p = r.json()["project"]
    assert set(p) >= V1_PROJECT
    assert (p["name"], p["workspaceId"], p["workspaceName"], p["description"], p["key"], p["username"]) == (
        "Detection",
        ws,
        "Vision",
        "boxes",
        "DET",
        "determined",
    )
    assert client.get(f"/api/v1/projects/{p['id']}", headers=admin).json()["project"] == p
    assert project(client, user, ws, "Tracking").json()["project"]["key"] == "TRACK"  # made from the name
    assert client.get(f"/api/v1/workspaces/{ws}", headers=user).json()["workspace"]["numProjects"] == 2


def test_names_are_unique_in_a_workspace_whatever_their_case(client: TestClient, user: dict, admin: dict) -> None:
    vision, audio = workspace(client, user, "Vision"), workspace(client, user, "Audio")
    assert project(client, user, vision, "Detection").status_code == 200
    r = project(client, admin, vision, "DETECTION")
    assert r.status_code == 409 and "'DETECTION'" in r.json()["message"], r.text
    assert project(client, user, audio, "Detection").status_code == 200  # another workspace
    names = [p["name"] for p in client.get("/api/v1/workspaces/0/projects", headers=user).json()["projects"]]
    assert names == ["Uncategorized", "Detection", "Detection"]


def test_refusals_name_the_field_and_store_nothing(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")
    for path, body, status, field in [
        ("/api/v1/workspaces/1/projects", {"name": "P", "workspaceId": 1}, 400, "workspaceId"),  # immutable
        (f"/api/v1/workspaces/{ws}/projects", {"name": "P", "workspaceId": 1}, 400, "workspaceId"),
        (f"/api/v1/workspaces/{ws}/projects", {"name": "P", "key": "toolong"}, 400, "key"),
        (f"/api/v1/workspaces/{ws}/projects", {"name": " "}, 400, "name"),
        ("/api/v1/workspaces/99/projects", {"name": "P"}, 404, "workspace 99"),
    ]:
        r = post(client, path, body, user)
        assert r.status_code == status and field in r.json()["message"], (path, body, r.text)
    assert client.get("/api/v1/workspaces/0/projects", headers=user).json()["pagination"]["total"] == 1
    assert client.get("/api/v1/workspaces/99/projects", headers=user).status_code == 404
    assert client.get("/api/v1/projects/99", headers=user).status_code == 404


def test_det_finds_a_project_by_name_and_pages_through_them(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")
    for name in ("Pc", "Pa", "Pb"):
        assert project(client, user, ws, name).status_code == 200
    found = client.get(f"/api/v1/workspaces/{ws}/projects?name=pb", headers=user).json()["projects"]
    assert [p["name"] for p in found] == ["Pb"]
    body = client.get(f"/api/v1/workspaces/{ws}/projects?offset=1&limit=1&sortBy=SORT_BY_NAME", headers=user).json()
    assert [p["name"] for p in body["projects"]] == ["Pb"]
    assert body["pagination"] == {"offset": 1, "limit": 1, "startIndex": 1, "endIndex": 2, "total": 3}
    r = client.get(f"/api/v1/workspaces/{ws}/projects?sortBy=SORT_BY_SIZE", headers=user)
    assert r.status_code == 400 and "sortBy" in r.json()["message"]


def test_an_experiment_goes_into_the_project_asked_for(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")
    pid = project(client, user, ws, "Detection").json()["project"]["id"]
    r = experiment(client, user, projectId=pid, activate=True)
    assert r.status_code == 200, r.text
    exp = r.json()["experiment"]
    assert (exp["projectId"], exp["projectName"], exp["workspaceId"], exp["workspaceName"]) == (
        pid,
        "Detection",
        ws,
        "Vision",
    )
    assert exp["projectOwnerId"] == client.get("/api/v1/me", headers=user).json()["user"]["id"]
    by_config = experiment(client, user, SINGLE_CONFIG + "workspace: vision\nproject: detection\n", projectId=None)
    assert by_config.status_code == 200 and by_config.json()["experiment"]["projectId"] == pid
    default = experiment(client, user, projectId=None).json()["experiment"]
    assert (default["projectId"], default["projectName"], default["workspaceId"]) == (1, "Uncategorized", 1)
    # det project describe lists them with ?projectId=; the project counts them
    listed = client.get(f"/api/v1/experiments?projectId={pid}", headers=user).json()["experiments"]
    assert sorted(e["id"] for e in listed) == sorted([exp["id"], by_config.json()["experiment"]["id"]])
    shown = client.get(f"/api/v1/projects/{pid}", headers=user).json()["project"]
    assert (shown["numExperiments"], shown["numActiveExperiments"], shown["numRuns"]) == (2, 1, 2)
    assert shown["lastExperimentStartedAt"]
    assert client.get(f"/api/v1/workspaces/{ws}", headers=user).json()["workspace"]["numExperiments"] == 2


def test_an_unknown_project_is_refused_and_nothing_stored(client: TestClient, user: dict) -> None:
    r = experiment(client, user, projectId=99)
    assert r.status_code == 404 and r.json()["message"].startswith("projectId"), r.text
    for extra, field in (
        ("workspace: Nowhere\nproject: P\n", "workspace"),
        ("workspace: Uncategorized\nproject: Nope\n", "project"),
        ("workspace: Uncategorized\n", "project"),
    ):
        r = experiment(client, user, SINGLE_CONFIG + extra)
        assert r.status_code == 400 and r.json()["message"].startswith(field), r.text
    r = experiment(client, user, validateOnly=True, projectId=99)  # validating says so too
    assert r.status_code == 404
    assert count_experiments(client, user) == 0
