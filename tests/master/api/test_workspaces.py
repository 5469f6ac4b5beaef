"""Workspaces over the API: the default one, create (unique names whatever their case), det's lookups
by name, pages and sorting."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.master.fakes import post

# what det's bindings require of a v1Workspace (determined 0.38.1, bindings.py)
V1_WORKSPACE = {
    "archived",
    "errorMessage",
    "id",
    "immutable",
    "name",
    "numExperiments",
    "numProjects",
    "pinned",
    "state",
    "userId",
    "username",
}


def create(client: TestClient, headers: dict, name: str, **extra: object):
    return post(
        client,
        "/api/v1/workspaces",
        {
            "name": name,
            "agentUserGroup": None,
            "checkpointStorageConfig": None,
            "defaultAuxPool": None,
            "defaultComputePool": None,
            **extra,
        },
        headers,
    )


def names(client: TestClient, headers: dict, query: str = "") -> list[str]:
    r = client.get(f"/api/v1/workspaces{query}", headers=headers)
    assert r.status_code == 200, r.text
    return [w["name"] for w in r.json()["workspaces"]]


def test_the_default_workspace_is_listed_with_every_key_det_needs(client: TestClient, user: dict) -> None:
    body = client.get(
        "/api/v1/workspaces?limit=200&offset=0&orderBy=ORDER_BY_ASC&sortBy=SORT_BY_ID", headers=user
    ).json()
    [ws] = body["workspaces"]
    assert set(ws) >= V1_WORKSPACE
    assert (ws["id"], ws["name"], ws["immutable"], ws["numProjects"], ws["username"]) == (
        1,
        "Uncategorized",
        True,
        1,
        "admin",
    )
    assert ws["state"] == "WORKSPACE_STATE_UNSPECIFIED"
    assert body["pagination"] == {"offset": 0, "limit": 200, "startIndex": 0, "endIndex": 1, "total": 1}


def test_create_owns_it_and_a_taken_name_in_any_case_is_a_409(client: TestClient, user: dict, admin: dict) -> None:
    r = create(client, user, "Vision")
    assert r.status_code == 200, r.text
    assert r.json()["namespaceBindings"] == {}  # det iterates it
    ws = r.json()["workspace"]
    assert set(ws) >= V1_WORKSPACE
    assert (ws["name"], ws["username"], ws["immutable"], ws["numProjects"]) == ("Vision", "determined", False, 0)
    assert ws["pinned"] is True  # Determined pins a new workspace for its creator
    assert client.get(f"/api/v1/workspaces/{ws['id']}", headers=user).json()["workspace"] == ws
    assert client.get(f"/api/v1/workspaces/{ws['id']}", headers=admin).json()["workspace"] == {**ws, "pinned": False}
    for taken in ("Vision", "vISION", "uncategorized"):
        r = create(client, admin, taken)
        assert r.status_code == 409, r.text
        assert repr(taken) in r.json()["message"] and r.json()["fields"][0]["field"] == "name"
    assert names(client, user) == ["Uncategorized", "Vision"]


def test_bad_names_and_unsupported_settings_are_a_400_and_store_nothing(client: TestClient, user: dict) -> None:
    for body, field in (
        ({"name": ""}, "name"),
        ({"name": "x" * 256}, "name"),
        ({}, "name"),
        ({"name": "ok", "defaultComputePool": "gpu"}, "defaultComputePool"),
        (
            {"name": "ok", "checkpointStorageConfig": {"type": "shared_fs", "host_path": "/etc"}},
            "checkpointStorageConfig.host_path",
        ),
        ({"name": "ok", "checkpointStorageConfig": {"type": "gcs"}}, "checkpointStorageConfig"),
        ({"name": "ok", "checkpointStorageConfig": "x"}, "checkpointStorageConfig"),
    ):
        r = post(client, "/api/v1/workspaces", body, user)
        assert r.status_code == 400, (body, r.text)
        assert field in r.json()["message"], r.text
    assert names(client, user) == ["Uncategorized"]


def test_det_looks_workspaces_up_by_name(client: TestClient, user: dict) -> None:
    for name in ("Audio", "Vision"):
        assert create(client, user, name).status_code == 200
    assert names(client, user, "?name=vision") == ["Vision"]  # any case (det project list, the SDK)
    assert names(client, user, "?nameCaseSensitive=Vision") == ["Vision"]  # this case (det workspace describe)
    assert names(client, user, "?nameCaseSensitive=vision") == []
    assert names(client, user, "?name=Visio") == []  # a whole name, not a part
    assert names(client, user, "?users=determined") == ["Audio", "Vision"]
    assert names(client, user, "?pinned=true") == ["Audio", "Vision"]  # pinned for their creator
    assert names(client, user, "?pinned=false") == ["Uncategorized"]


def test_pages_and_sorting(client: TestClient, user: dict) -> None:
    for name in ("Xb", "Xc", "Xa"):  # the same order in any collation
        assert create(client, user, name).status_code == 200
    assert names(client, user, "?sortBy=SORT_BY_NAME") == ["Uncategorized", "Xa", "Xb", "Xc"]
    assert names(client, user, "?sortBy=SORT_BY_NAME&orderBy=ORDER_BY_DESC") == ["Xc", "Xb", "Xa", "Uncategorized"]
    body = client.get("/api/v1/workspaces?offset=1&limit=2", headers=user).json()
    assert [w["name"] for w in body["workspaces"]] == ["Xb", "Xc"]
    assert body["pagination"] == {"offset": 1, "limit": 2, "startIndex": 1, "endIndex": 3, "total": 4}
    # no limit, or one too large: a bounded page, which det's and the SDK's paging go on from
    assert client.get("/api/v1/workspaces?limit=100000", headers=user).json()["pagination"]["limit"] == 1000
    for query, field in (
        ("?sortBy=SORT_BY_COLOR", "sortBy"),
        ("?orderBy=UP", "orderBy"),
        ("?archived=maybe", "archived"),
    ):
        r = client.get(f"/api/v1/workspaces{query}", headers=user)
        assert r.status_code == 400 and field in r.json()["message"], r.text


def test_an_unknown_workspace_is_a_404(client: TestClient, user: dict) -> None:
    r = client.get("/api/v1/workspaces/77", headers=user)
    assert r.status_code == 404 and "workspace 77" in r.json()["message"]
