"""Projects as det edits them: PATCH, archive, move, notes, delete; the default project refused (403 for
others); an archived project or one in an archived workspace is neither edited nor moved; experiments
of archived projects and workspaces are left out of ?archived=false."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.master.api.test_workspace_edits import experiment, project, workspace
from tests.master.fakes import post


def get(client: TestClient, headers: dict, pid: int) -> dict:
    return client.get(f"/api/v1/projects/{pid}", headers=headers).json()["project"]


def patch(client: TestClient, headers: dict, pid: int, body: dict):
    return client.patch(f"/api/v1/projects/{pid}", content=json.dumps(body), headers=headers)


def move(client: TestClient, headers: dict, pid: int, ws: int):
    return post(client, f"/api/v1/projects/{pid}/move", {"destinationWorkspaceId": ws, "projectId": pid}, headers)


def test_patch_edits_name_description_and_key(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")["id"]
    pid, other = project(client, user, ws, "Detection"), project(client, user, ws, "Tracking")
    r = patch(client, user, pid, {"name": "Boxes", "description": "d", "key": "box"})
    assert r.status_code == 200, r.text
    shown = get(client, user, pid)
    assert (shown["name"], shown["description"], shown["key"]) == ("Boxes", "d", "BOX")
    r = patch(client, user, other, {"name": "boxes"})
    assert r.status_code == 409 and "'boxes'" in r.json()["message"]
    for body, field in (({"name": " "}, "name"), ({"key": "toolong"}, "key"), ({"description": 5}, "description")):
        r = patch(client, user, pid, body)
        assert r.status_code == 400 and field in r.json()["message"], (body, r.text)
    assert get(client, user, pid) == shown


def test_only_its_creator_or_an_admin_changes_it_and_the_default_is_refused(
    client: TestClient, user: dict, admin: dict
) -> None:
    ws = workspace(client, admin, "Admins")["id"]
    pid = project(client, admin, ws, "Theirs")
    calls = (
        ("PATCH", "", '{"name": "Mine"}'),
        ("POST", "/archive", None),
        ("POST", "/unarchive", None),
        ("POST", "/move", json.dumps({"destinationWorkspaceId": ws})),
        ("DELETE", "", None),
        ("PUT", "/notes", '{"notes": []}'),
        ("POST", "/notes", '{"name": "n", "contents": "c"}'),
    )
    for method, path, body in calls:
        r = client.request(method, f"/api/v1/projects/{pid}{path}", content=body, headers=user)
        assert r.status_code == 403, (method, path, r.text)
        r = client.request(method, f"/api/v1/projects/1{path}", content=body, headers=user)
        assert r.status_code == (400 if method == "PATCH" else 403), (method, path, r.text)
    for method, path, body in calls[:5]:
        r = client.request(method, f"/api/v1/projects/1{path}", content=body, headers=admin)
        assert r.status_code == 400 and "default project" in r.json()["message"], (method, path, r.text)
    assert get(client, user, pid)["name"] == "Theirs" and get(client, user, 1)["workspaceId"] == 1


def test_archive_and_move_follow_determined(client: TestClient, user: dict) -> None:
    vision, audio = workspace(client, user, "Vision")["id"], workspace(client, user, "Audio")["id"]
    pid = project(client, user, vision, "Detection")
    assert post(client, f"/api/v1/projects/{pid}/archive", None, user).status_code == 200
    assert get(client, user, pid)["archived"]
    assert patch(client, user, pid, {"name": "X"}).status_code == 400
    assert move(client, user, pid, audio).status_code == 400
    r = experiment(client, user, pid)
    assert r.status_code == 400 and "archived" in r.json()["message"]
    assert post(client, f"/api/v1/projects/{pid}/unarchive", None, user).status_code == 200
    # while its workspace is archived: neither archived, unarchived nor moved
    assert post(client, f"/api/v1/workspaces/{vision}/archive", None, user).status_code == 200
    for path in ("archive", "unarchive"):
        r = post(client, f"/api/v1/projects/{pid}/{path}", None, user)
        assert r.status_code == 400 and "'Vision'" in r.json()["message"], r.text
    assert move(client, user, pid, audio).status_code == 400
    assert post(client, f"/api/v1/workspaces/{vision}/unarchive", None, user).status_code == 200
    for dest, status, field in ((1, 400, "destinationWorkspaceId"), (99, 404, "destinationWorkspaceId")):
        r = move(client, user, pid, dest)
        assert r.status_code == status and r.json()["message"].startswith(field), r.text
    assert post(client, f"/api/v1/workspaces/{audio}/archive", None, user).status_code == 200
    assert move(client, user, pid, audio).status_code == 400  # into an archived workspace
    assert post(client, f"/api/v1/workspaces/{audio}/unarchive", None, user).status_code == 200
    assert get(client, user, pid)["workspaceId"] == vision
    assert move(client, user, pid, audio).status_code == 200
    assert get(client, user, pid)["workspaceId"] == audio
    project(client, user, vision, "Detection")
    r = move(client, user, pid, vision)  # the name is taken there
    assert r.status_code == 409 and get(client, user, pid)["workspaceId"] == audio


def test_notes_are_added_and_replaced(client: TestClient, user: dict) -> None:
    pid = project(client, user, workspace(client, user, "Vision")["id"], "Detection")
    note, note2 = {"name": "Hello", "contents": "Hello World"}, {"name": "Hello 2", "contents": "Hello World"}
    assert post(client, f"/api/v1/projects/{pid}/notes", note, user).json()["notes"] == [note]
    assert post(client, f"/api/v1/projects/{pid}/notes", note2, user).json()["notes"] == [note, note2]
    r = client.put(
        f"/api/v1/projects/{pid}/notes", content=json.dumps({"notes": [note], "projectId": pid}), headers=user
    )
    assert r.status_code == 200 and r.json()["notes"] == [note]
    r = client.put(f"/api/v1/projects/{pid}/notes", content=json.dumps({"notes": [{"name": 1}]}), headers=user)
    assert r.status_code == 400 and "notes[0]" in r.json()["message"]
    assert get(client, user, pid)["notes"] == [note]


def test_delete_takes_its_ended_experiments(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")["id"]
    pid = project(client, user, ws, "Detection")
    exp = experiment(client, user, pid).json()["experiment"]
    r = client.delete(f"/api/v1/projects/{pid}", headers=user)
    assert r.status_code == 400 and f"experiment {exp['id']}" in r.json()["message"]
    assert get(client, user, pid)["numExperiments"] == 1
    assert post(client, f"/api/v1/experiments/{exp['id']}/kill", None, user).status_code == 200
    r = client.delete(f"/api/v1/projects/{pid}", headers=user)
    assert r.status_code == 200 and r.json() == {"completed": False}
    assert client.get(f"/api/v1/projects/{pid}", headers=user).status_code == 404
    empty = project(client, user, ws, "Empty")
    assert client.delete(f"/api/v1/projects/{empty}", headers=user).json() == {"completed": True}


def test_unarchived_listing_leaves_out_archived_projects_and_workspaces(client: TestClient, user: dict) -> None:
    vision, audio = workspace(client, user, "Vision")["id"], workspace(client, user, "Audio")["id"]
    p1, p2, p3 = (
        project(client, user, vision, "A"),
        project(client, user, vision, "B"),
        project(client, user, audio, "C"),
    )
    ids = {pid: experiment(client, user, pid).json()["experiment"]["id"] for pid in (p1, p2, p3)}

    def listed(query: str) -> set[int]:
        return {e["id"] for e in client.get(f"/api/v1/experiments?{query}", headers=user).json()["experiments"]}

    assert post(client, f"/api/v1/projects/{p2}/archive", None, user).status_code == 200
    assert post(client, f"/api/v1/workspaces/{audio}/archive", None, user).status_code == 200
    assert listed("archived=false") == {ids[p1]}
    assert listed(f"archived=false&projectId={p2}") == {ids[p2]}  # one project's: its unarchived experiments
    assert listed("") == set(ids.values())
