"""The model registry over the API, as det and the SDK use it: models by name or id with every key
of Determined's v1Model, unique and well-formed names, det's filters, sorts and pages, edits by the
owner or an admin only, archive, delete; versions 1, 2, 3... per model embedding their checkpoint,
only of COMPLETED checkpoints (an unknown or deleted one is a 400 naming checkpointUuid)."""

from __future__ import annotations

import json
import uuid
from urllib.parse import quote

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.db import models
from pedl.master.identity.passwords import client_hash
from pedl.master.model_registry import service as model_registry
from tests.master.fakes import SINGLE_CONFIG, FakeAgent, StartedTask, bearer, create_experiment, ctx_of, login, post

MODEL_KEYS = {
    "archived",
    "creationTime",
    "id",
    "lastUpdatedTime",
    "metadata",
    "name",
    "numVersions",
    "userId",
    "username",
    "workspaceId",
    "description",
    "labels",
    "notes",
}  # v1Model's required ones, and more
VERSION_KEYS = {
    "checkpoint",
    "creationTime",
    "id",
    "lastUpdatedTime",
    "model",
    "version",
    "name",
    "comment",
    "notes",
    "metadata",
    "labels",
    "userId",
    "username",
}


def create(client: TestClient, headers: dict, name: str, **fields) -> dict:
    r = post(
        client,
        "/api/v1/models",
        {
            "name": name,
            "description": None,
            "labels": None,
            "metadata": None,
            "notes": None,
            "workspaceName": None,
            **fields,
        },
        headers,
    )
    assert r.status_code == 200, r.text
    return r.json()["model"]


def get(client: TestClient, headers: dict, path: str, **params) -> dict:
    r = client.get(path, params=params, headers=headers)
    assert r.status_code == 200, r.text
    return r.json()


def send(client: TestClient, method: str, path: str, headers: dict, body: dict | None = None):
    return client.request(method, path, content=None if body is None else json.dumps(body), headers=headers)


@pytest.fixture
def bob(client: TestClient, admin: dict) -> dict:
    body = {
        "user": {"username": "bob", "admin": False, "active": True},
        "password": client_hash("pw"),
        "isHashed": True,
    }
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    return bearer(login(client, "bob", "pw"))


@pytest.fixture
def task(client: TestClient, user: dict, agent: FakeAgent) -> StartedTask:
    create_experiment(client, user, SINGLE_CONFIG)
    [started] = agent.start_all()
    return started


def checkpoint(client: TestClient, task: StartedTask, steps: int) -> str:
    name = str(uuid.uuid4())
    body = {
        "uuid": name,
        "allocationId": task.allocation_id,
        "taskId": task.task_id,
        "training": {},
        "metadata": {"steps_completed": steps},
        "resources": {"model.pt": "10"},
        "state": "STATE_COMPLETED",
    }
    assert post(client, "/api/v1/checkpoints", body, bearer(task.token)).status_code == 200
    return name


def register(client: TestClient, headers: dict, model: str, ckpt: str, **fields):
    return post(
        client,
        f"/api/v1/models/{quote(model)}/versions",
        {"modelName": model, "checkpointUuid": ckpt, **fields},
        headers,
    )


# -- models ---------------------------------------------------------------------------------------


def test_create_then_get_by_name_or_id(client: TestClient, user: dict) -> None:
    made = create(client, user, "my model", description="first", metadata={"k": [1, 2]}, labels=["a", "b", "a"])
    assert set(made) >= MODEL_KEYS
    assert (made["name"], made["description"], made["metadata"], made["labels"]) == (
        "my model",
        "first",
        {"k": [1, 2]},
        ["a", "b"],
    )
    assert (made["username"], made["workspaceId"], made["numVersions"], made["archived"]) == ("determined", 1, 0, False)
    me = get(client, user, "/api/v1/me")["user"]
    assert made["userId"] == me["id"]
    assert get(client, user, "/api/v1/models/my%20model")["model"] == made
    assert get(client, user, f"/api/v1/models/{made['id']}")["model"] == made
    r = client.get("/api/v1/models/nothing-here", headers=user)
    assert r.status_code == 404 and "nothing-here" in r.json()["message"]


@pytest.mark.parametrize("name", ["", "   ", "a/b", "123", ".", "..", " padded", "tab\there", "x" * 256])
def test_bad_names_are_refused_naming_the_field(client: TestClient, user: dict, name: str) -> None:
    r = post(client, "/api/v1/models", {"name": name}, user)
    assert r.status_code == 400, r.text
    assert r.json()["fields"][0]["field"] == "name"
    assert get(client, user, "/api/v1/models")["models"] == []


def test_a_duplicate_name_is_a_conflict_and_changes_nothing(client: TestClient, user: dict, admin: dict) -> None:
    first = create(client, user, "dup", description="kept")
    r = post(client, "/api/v1/models", {"name": "dup", "description": "other"}, admin)
    assert r.status_code == 409 and "already exists" in r.json()["message"]
    assert get(client, user, "/api/v1/models")["models"] == [first]
    create(client, user, "Dup")  # names are case-sensitive, as in Determined
    r = send(client, "PATCH", "/api/v1/models/Dup", user, {"name": "dup"})
    assert r.status_code == 409
    assert get(client, user, "/api/v1/models/Dup")["model"]["name"] == "Dup"


def test_other_bad_fields_are_named(client: TestClient, user: dict) -> None:
    cases = [
        ({"name": "m", "labels": ["ok", ""]}, "labels[1]"),
        ({"name": "m", "workspaceName": "elsewhere"}, "workspaceName"),
        ({"name": "m", "workspaceId": 7}, "workspaceId"),
        ({"name": "m", "metadata": {f"k{i}": "x" * 1000 for i in range(70)}}, "metadata"),
        ({"name": "m", "metadata": [1]}, "metadata"),
    ]
    for body, field in cases:
        r = post(client, "/api/v1/models", body, user)
        assert r.status_code == 400 and r.json()["fields"][0]["field"] == field, (body, r.text)
    assert (
        post(
            client, "/api/v1/models", {"name": "m", "workspaceName": "Uncategorized", "workspaceId": 1}, user
        ).status_code
        == 200
    )


def test_models_live_in_a_workspace(client: TestClient, user: dict) -> None:
    r = post(client, "/api/v1/workspaces", {"name": "Team"}, user)
    assert r.status_code == 200, r.text
    team = r.json()["workspace"]["id"]
    assert create(client, user, "in-team", workspaceName="team")["workspaceId"] == team  # names match case aside
    assert create(client, user, "by-id", workspaceId=team)["workspaceId"] == team
    assert create(client, user, "default")["workspaceId"] == 1

    def names(**params) -> list[str]:
        return [m["name"] for m in get(client, user, "/api/v1/models", sortBy="SORT_BY_NAME", **params)["models"]]

    assert names(workspaceNames=["Team"]) == ["by-id", "in-team"]
    assert names(workspaceIds=[1]) == ["default"]
    assert names(workspaceNames=["nowhere"]) == []
    moved = send(client, "PATCH", "/api/v1/models/by-id", user, {"workspaceName": "Uncategorized"})
    assert moved.status_code == 200 and moved.json()["model"]["workspaceId"] == 1
    r = send(client, "PATCH", "/api/v1/models/by-id", user, {"workspaceName": "Team", "workspaceId": 1})
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "workspaceId"
    assert get(client, user, "/api/v1/models/by-id")["model"]["workspaceId"] == 1


def test_listing_filters_sorts_and_pages(
    client: TestClient, user: dict, admin: dict, clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    for i, (name, owner, labels) in enumerate(
        [("beta", user, ["x"]), ("alpha", admin, ["x", "y"]), ("gamma", user, ["y"])]
    ):
        clock.advance(10)
        create(client, owner, name, description=f"number {i}", labels=labels)

    def names(**params) -> list[str]:
        return [m["name"] for m in get(client, user, "/api/v1/models", **params)["models"]]

    assert names() == ["beta", "alpha", "gamma"]  # unspecified: by id
    assert names(sortBy="SORT_BY_NAME") == ["alpha", "beta", "gamma"]
    assert names(sortBy="SORT_BY_NAME", orderBy="ORDER_BY_DESC") == ["gamma", "beta", "alpha"]
    assert names(sortBy="SORT_BY_CREATION_TIME", orderBy="ORDER_BY_DESC") == ["gamma", "alpha", "beta"]
    assert names(name="AL") == ["alpha"]
    assert names(description="number 2") == ["gamma"]
    assert names(labels=["x"]) == ["beta", "alpha"]
    assert names(labels=["x", "y"]) == ["alpha"]  # every label asked for
    assert names(users=["admin"]) == ["alpha"]
    assert names(workspaceNames=["Uncategorized"]) == ["beta", "alpha", "gamma"]
    assert names(workspaceNames=["elsewhere"]) == []
    clock.advance(10)
    send(client, "PATCH", "/api/v1/models/beta", user, {"description": "changed"})
    assert names(sortBy="SORT_BY_LAST_UPDATED_TIME") == ["alpha", "gamma", "beta"]
    assert post(client, "/api/v1/models/gamma/archive", None, user).status_code == 200
    assert names(archived="false") == ["beta", "alpha"] and names(archived="true") == ["gamma"]
    bad = client.get("/api/v1/models", params={"sortBy": "SORT_BY_NOPE"}, headers=user)
    assert bad.status_code == 400 and bad.json()["fields"][0]["field"] == "sortBy"

    monkeypatch.setattr(model_registry, "PAGE_MAX", 2)  # no limit (or a larger one) answers a page
    first = get(client, user, "/api/v1/models", limit=0)
    assert [m["name"] for m in first["models"]] == ["beta", "alpha"]
    assert first["pagination"]["endIndex"] == 2 and first["pagination"]["total"] == 3
    rest = get(client, user, "/api/v1/models", offset=2, limit=50)
    assert [m["name"] for m in rest["models"]] == ["gamma"] and rest["pagination"]["endIndex"] == 3


def test_the_owner_edits_and_others_cannot(client: TestClient, user: dict, bob: dict, admin: dict) -> None:
    create(client, user, "edited", description="d0", metadata={"a": 1}, labels=["l1"])
    for method, path, body in [
        ("PATCH", "/api/v1/models/edited", {"description": "by bob"}),
        ("POST", "/api/v1/models/edited/archive", None),
        ("DELETE", "/api/v1/models/edited", None),
    ]:
        r = send(client, method, path, bob, body)
        assert r.status_code == 403 and "owner" in r.json()["message"], (method, path)
    got = get(client, user, "/api/v1/models/edited")["model"]
    assert (got["description"], got["archived"]) == ("d0", False)

    r = send(
        client,
        "PATCH",
        "/api/v1/models/edited",
        user,
        {"description": "d1", "metadata": {"b": 2}, "labels": ["l2", "l3"], "notes": "n"},
    )
    assert r.status_code == 200, r.text
    assert {k: r.json()["model"][k] for k in ("description", "metadata", "labels", "notes")} == {
        "description": "d1",
        "metadata": {"b": 2},
        "labels": ["l2", "l3"],
        "notes": "n",
    }
    r = send(client, "PATCH", "/api/v1/models/edited", admin, {"name": "renamed"})
    assert r.status_code == 200 and r.json()["model"]["username"] == "determined"  # the owner stays
    assert client.get("/api/v1/models/edited", headers=user).status_code == 404
    bad = send(client, "PATCH", "/api/v1/models/renamed", user, {"name": "a/b"})
    assert bad.status_code == 400 and bad.json()["fields"][0]["field"] == "name"
    assert get(client, user, "/api/v1/models/renamed")["model"]["description"] == "d1"
    assert get(client, user, "/api/v1/model/labels")["labels"] == ["l2", "l3"]


def test_archive_unarchive_delete(client: TestClient, user: dict, task: StartedTask) -> None:
    create(client, user, "arch")
    ckpt = checkpoint(client, task, 1)
    assert register(client, user, "arch", ckpt).status_code == 200
    assert post(client, "/api/v1/models/arch/archive", None, user).status_code == 200
    assert get(client, user, "/api/v1/models/arch")["model"]["archived"] is True
    r = register(client, user, "arch", ckpt)
    assert r.status_code == 409 and "archived" in r.json()["message"]
    assert post(client, "/api/v1/models/arch/unarchive", None, user).status_code == 200
    assert get(client, user, "/api/v1/models/arch")["model"]["archived"] is False
    assert send(client, "DELETE", "/api/v1/models/arch", user).status_code == 200
    assert client.get("/api/v1/models/arch", headers=user).status_code == 404
    assert get(client, user, f"/api/v1/checkpoints/{ckpt}")["checkpoint"]["state"] == "STATE_COMPLETED"
    with ctx_of(client.app).db.session() as s:
        assert s.query(models.ModelVersion).count() == 0 and s.query(models.ModelLabel).count() == 0


# -- versions -------------------------------------------------------------------------------------


def test_versions_number_per_model_and_embed_their_checkpoint(
    client: TestClient, user: dict, task: StartedTask
) -> None:
    a, b = checkpoint(client, task, 1), checkpoint(client, task, 2)
    model = create(client, user, "vm")
    create(client, user, "other")
    r = register(client, user, "vm", a, name="first", comment="c", metadata={"m": 1}, labels=["v"])
    assert r.status_code == 200, r.text
    v1 = r.json()["modelVersion"]
    assert set(v1) >= VERSION_KEYS
    assert (v1["version"], v1["name"], v1["comment"], v1["metadata"], v1["labels"], v1["username"]) == (
        1,
        "first",
        "c",
        {"m": 1},
        ["v"],
        "determined",
    )
    assert v1["checkpoint"] == get(client, user, f"/api/v1/checkpoints/{a}")["checkpoint"]
    assert v1["model"]["id"] == model["id"] and v1["model"]["numVersions"] == 1
    by_id = post(client, f"/api/v1/models/{model['id']}/versions", {"checkpointUuid": b}, user)  # det --json
    assert by_id.status_code == 200 and by_id.json()["modelVersion"]["version"] == 2
    assert register(client, user, "other", b).json()["modelVersion"]["version"] == 1
    assert register(client, user, "vm", a).json()["modelVersion"]["version"] == 3  # the same checkpoint again

    listed = get(client, user, "/api/v1/models/vm/versions", orderBy="ORDER_BY_DESC")
    assert [v["version"] for v in listed["modelVersions"]] == [3, 2, 1]
    assert listed["model"]["numVersions"] == 3 and listed["pagination"]["total"] == 3
    latest = get(client, user, "/api/v1/models/vm/versions", limit=1, sortBy="SORT_BY_VERSION", orderBy="ORDER_BY_DESC")
    assert [v["version"] for v in latest["modelVersions"]] == [3] and latest["pagination"]["endIndex"] == 1
    assert get(client, user, "/api/v1/models/vm/versions/2")["modelVersion"]["checkpoint"]["uuid"] == b
    assert client.get("/api/v1/models/vm/versions/9", headers=user).status_code == 404

    r = send(client, "PATCH", "/api/v1/models/vm/versions/2", user, {"name": "second", "notes": "readme"})
    assert r.status_code == 200 and (r.json()["modelVersion"]["name"], r.json()["modelVersion"]["notes"]) == (
        "second",
        "readme",
    )
    r = send(client, "PATCH", "/api/v1/models/vm/versions/2", user, {"checkpoint": {"uuid": a}})
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "checkpoint.uuid"
    assert send(client, "DELETE", "/api/v1/models/vm/versions/3", user).status_code == 200
    assert [v["version"] for v in get(client, user, "/api/v1/models/vm/versions")["modelVersions"]] == [1, 2]
    assert register(client, user, "vm", b).json()["modelVersion"]["version"] == 3  # one past the highest


def test_only_completed_checkpoints_register(client: TestClient, app: FastAPI, user: dict, task: StartedTask) -> None:
    create(client, user, "strict")
    gone = checkpoint(client, task, 1)
    with ctx_of(app).db.session() as s:
        s.get(models.Checkpoint, gone).state = "STATE_DELETED"
    for ckpt, words in ((str(uuid.uuid4()), "no checkpoint"), (gone, "deleted"), ("x" * 100, "no checkpoint")):
        r = register(client, user, "strict", ckpt)
        assert r.status_code == 400, r.text
        assert r.json()["fields"][0]["field"] == "checkpointUuid" and words in r.json()["message"]
    deleting = checkpoint(client, task, 3)
    with ctx_of(app).db.session() as s:
        s.get(models.Experiment, s.get(models.Checkpoint, deleting).experiment_id).state = "STATE_DELETING"
    r = register(client, user, "strict", deleting)
    assert r.status_code == 400 and "being deleted" in r.json()["message"], r.text
    with ctx_of(app).db.session() as s:
        s.get(models.Experiment, s.get(models.Checkpoint, deleting).experiment_id).state = "STATE_ACTIVE"
    r = register(client, user, "strict", checkpoint(client, task, 2), modelName="another")
    assert r.status_code == 400 and r.json()["fields"][0]["field"] == "modelName"
    assert get(client, user, "/api/v1/models/strict")["model"]["numVersions"] == 0


def test_only_the_models_owner_or_an_admin_changes_versions(
    client: TestClient, user: dict, bob: dict, admin: dict, task: StartedTask
) -> None:
    create(client, user, "mine")
    ckpt = checkpoint(client, task, 1)
    assert register(client, bob, "mine", ckpt).status_code == 403
    assert register(client, admin, "mine", ckpt).json()["modelVersion"]["username"] == "admin"
    assert send(client, "PATCH", "/api/v1/models/mine/versions/1", bob, {"name": "x"}).status_code == 403
    assert send(client, "DELETE", "/api/v1/models/mine/versions/1", bob).status_code == 403
    assert register(client, bearer(task.token), "mine", ckpt).status_code == 403  # a task token
    assert [v["name"] for v in get(client, bob, "/api/v1/models/mine/versions")["modelVersions"]] == [""]
    assert send(client, "DELETE", "/api/v1/models/mine/versions/1", user).status_code == 200
