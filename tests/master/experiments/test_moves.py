"""Moving an experiment into another project (POST /experiments/{id}/move, as det and the SDK send it):
the owner or an admin, into an existing project that is not archived; the API shows the new project;
refusals name the field and change nothing."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.master.db import models
from pedl.master.identity.passwords import client_hash
from tests.master.fakes import SINGLE_CONFIG, bearer, create_experiment, ctx_of, login, post


def project_of(client: TestClient, headers: dict, exp_id: int) -> tuple[int, str, str]:
    exp = client.get(f"/api/v1/experiments/{exp_id}", headers=headers).json()["experiment"]
    return exp["projectId"], exp["workspaceName"], exp["projectName"]


def new_project(client: TestClient, headers: dict, ws_name: str, name: str) -> int:
    ws = post(client, "/api/v1/workspaces", {"name": ws_name}, headers).json()["workspace"]["id"]
    r = post(client, f"/api/v1/workspaces/{ws}/projects", {"name": name}, headers)
    assert r.status_code == 200, r.text
    return r.json()["project"]["id"]


def move(client: TestClient, headers: dict, exp_id: int, project_id: object, **extra: object):
    return post(
        client,
        f"/api/v1/experiments/{exp_id}/move",
        {"destinationProjectId": project_id, "experimentId": exp_id, **extra},
        headers,
    )


def set_archived(app: FastAPI, model: type, row_id: int) -> None:
    with ctx_of(app).db.session() as s:
        s.get(model, row_id).archived = True


def test_the_owner_moves_an_experiment_and_the_api_shows_its_new_project(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    assert project_of(client, user, exp["id"]) == (1, "Uncategorized", "Uncategorized")
    target = new_project(client, user, "team", "vision")

    r = move(client, user, exp["id"], target)
    assert (r.status_code, r.json()) == (200, {})
    assert project_of(client, user, exp["id"]) == (target, "team", "vision")
    listed = client.get("/api/v1/experiments", params={"projectId": target}, headers=user).json()["experiments"]
    assert [e["id"] for e in listed] == [exp["id"]]
    events = client.get(f"/api/v1/experiments/{exp['id']}/events", headers=user).json()["events"]
    assert any(
        "moved from Uncategorized/Uncategorized" in e["message"] and "team/vision" in e["message"] for e in events
    ), events
    # and back, without experimentId in the body (pedl's CLI may leave it out)
    r = post(client, f"/api/v1/experiments/{exp['id']}/move", {"destinationProjectId": 1}, user)
    assert r.status_code == 200, r.text
    assert project_of(client, user, exp["id"])[0] == 1


def test_a_config_that_names_its_project_names_the_new_one(client: TestClient, user: dict) -> None:
    first = new_project(client, user, "ws-a", "proj-a")
    second = new_project(client, user, "ws-b", "proj-b")
    exp = create_experiment(client, user, SINGLE_CONFIG + "workspace: ws-a\nproject: proj-a\n", activate=False)
    assert project_of(client, user, exp["id"])[0] == first
    assert move(client, user, exp["id"], second).status_code == 200
    config = client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()["config"]
    assert (config["workspace"], config["project"]) == ("ws-b", "proj-b")


def test_only_the_owner_or_an_admin_moves(client: TestClient, user: dict, admin: dict) -> None:
    target = new_project(client, user, "mine", "p")
    exp = create_experiment(client, admin, SINGLE_CONFIG, activate=False)
    r = move(client, user, exp["id"], target)
    assert r.status_code == 403 and "owner" in r.json()["message"]
    assert project_of(client, admin, exp["id"])[0] == 1
    assert move(client, admin, exp["id"], target).status_code == 200
    assert project_of(client, admin, exp["id"])[0] == target


def test_an_unknown_project_or_experiment_is_a_404_naming_it(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    r = move(client, user, exp["id"], 4242)
    assert r.status_code == 404
    assert "destinationProjectId" in r.json()["message"] and "4242" in r.json()["message"]
    assert r.json()["fields"] == [{"field": "destinationProjectId", "message": "not found"}]
    assert move(client, user, 999999, 1).status_code == 404
    assert project_of(client, user, exp["id"])[0] == 1


def test_bad_bodies_are_400s_naming_the_field(client: TestClient, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    target = new_project(client, user, "w", "p")
    for body, field in (
        ({}, "destinationProjectId"),
        ({"destinationProjectId": "x"}, "destinationProjectId"),
        ({"destinationProjectId": 0}, "destinationProjectId"),
        ({"destinationProjectId": target, "experimentId": exp["id"] + 1}, "experimentId"),
    ):
        r = post(client, f"/api/v1/experiments/{exp['id']}/move", body, user)
        assert r.status_code == 400, (body, r.text)
        assert field in r.json()["message"], (body, r.json())
    assert project_of(client, user, exp["id"])[0] == 1


def test_archived_projects_and_experiments_stay_where_they_are(client: TestClient, app: FastAPI, user: dict) -> None:
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    archived = new_project(client, user, "old", "done")
    set_archived(app, models.Project, archived)
    r = move(client, user, exp["id"], archived)
    assert r.status_code == 400 and "destinationProjectId" in r.json()["message"] and "archived" in r.json()["message"]

    in_archived_ws = new_project(client, user, "gone", "p")
    with ctx_of(app).db.session() as s:
        ws_id = s.get(models.Project, in_archived_ws).workspace_id
    set_archived(app, models.Workspace, ws_id)
    r = move(client, user, exp["id"], in_archived_ws)
    assert r.status_code == 400 and "workspace is archived" in r.json()["message"]

    target = new_project(client, user, "live", "p")
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    assert post(client, f"/api/v1/experiments/{exp['id']}/archive", None, user).status_code == 200
    r = move(client, user, exp["id"], target)
    assert r.status_code == 400 and "archived" in r.json()["message"] and "unarchive" in r.json()["message"]
    assert project_of(client, user, exp["id"])[0] == 1


def test_moving_out_of_an_archived_project_is_refused(client: TestClient, app: FastAPI, user: dict) -> None:
    source = new_project(client, user, "src", "p")
    target = new_project(client, user, "dst", "p")
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    assert move(client, user, exp["id"], source).status_code == 200
    set_archived(app, models.Project, source)
    r = move(client, user, exp["id"], target)
    assert r.status_code == 400 and "archived" in r.json()["message"]
    assert project_of(client, user, exp["id"])[0] == source


def test_another_users_project_takes_the_owners_experiment(client: TestClient, user: dict, admin: dict) -> None:
    """As experiments may be created in any project, they may be moved into any (Determined's RBAC-less
    default)."""
    body = {"user": {"username": "carol", "admin": False}, "password": client_hash("pw"), "isHashed": True}
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    carol = bearer(login(client, "carol", "pw"))
    hers = new_project(client, carol, "carols", "p")
    exp = create_experiment(client, user, SINGLE_CONFIG, activate=False)
    assert move(client, user, exp["id"], hers).status_code == 200
    assert project_of(client, user, exp["id"])[0] == hers
