"""Bulk experiment actions (POST /api/v1/projects/{id}/experiments/{action}) as det's SDK and WebUI
send them: by ids or by filters, projectId -1 for any project; each experiment's error in results;
bounded (ids and filter matches), refusals name the field and change nothing."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from pedl.master.experiments import bulk as experiment_bulk
from tests.master.api.test_workspace_edits import experiment, project, workspace
from tests.master.fakes import post


def bulk(client: TestClient, headers: dict, action: str, body: dict, project_id: int = -1):
    if action == "delete":
        return client.request(
            "DELETE", f"/api/v1/projects/{project_id}/experiments/delete", content=json.dumps(body), headers=headers
        )
    return post(client, f"/api/v1/projects/{project_id}/experiments/{action}", body, headers)


ACTIVE = {"STATE_QUEUED", "STATE_PULLING", "STATE_STARTING", "STATE_RUNNING"}  # reported for an active one


def state(client: TestClient, headers: dict, eid: int) -> str:
    shown = client.get(f"/api/v1/experiments/{eid}", headers=headers).json()["experiment"]["state"]
    return "STATE_ACTIVE" if shown in ACTIVE else shown


def test_by_ids_each_result_says_what_happened(client: TestClient, user: dict, admin: dict) -> None:
    mine = experiment(client, user, 1).json()["experiment"]["id"]
    theirs = experiment(client, admin, 1).json()["experiment"]["id"]
    r = bulk(client, user, "activate", {"experimentIds": [mine, theirs, 999], "projectId": -1})
    assert r.status_code == 200, r.text
    results = {x["id"]: x["error"] for x in r.json()["results"]}
    assert results[mine] == "" and "owner" in results[theirs] and "not found" in results[999]
    assert state(client, user, mine) == "STATE_ACTIVE" and state(client, admin, theirs) == "STATE_PAUSED"
    assert bulk(client, user, "pause", {"experimentIds": [mine], "projectId": -1}).json()["results"] == [
        {"id": mine, "error": ""}
    ]
    assert state(client, user, mine) == "STATE_PAUSED"
    assert bulk(client, user, "kill", {"experimentIds": [mine], "projectId": -1}).json()["results"][0]["error"] == ""
    assert state(client, user, mine) == "STATE_CANCELED"
    r = bulk(client, user, "archive", {"experimentIds": [mine, theirs], "projectId": -1})
    assert {x["id"]: bool(x["error"]) for x in r.json()["results"]} == {mine: False, theirs: True}
    assert client.get(f"/api/v1/experiments/{mine}", headers=user).json()["experiment"]["archived"]
    bulk(client, user, "unarchive", {"experimentIds": [mine]})
    assert not client.get(f"/api/v1/experiments/{mine}", headers=user).json()["experiment"]["archived"]


def test_by_filters_only_the_callers_experiments_in_the_right_states(
    client: TestClient, user: dict, admin: dict
) -> None:
    config = "name: {name}\nentrypoint: python train.py\nsearcher: {{name: single, metric: loss, max_length: 10}}\n"
    mine = experiment(client, user, 1, config.format(name="alpha-1")).json()["experiment"]["id"]
    other = experiment(client, user, 1, config.format(name="beta")).json()["experiment"]["id"]
    theirs = experiment(client, admin, 1, config.format(name="alpha-2")).json()["experiment"]["id"]
    assert bulk(client, user, "activate", {"experimentIds": [], "projectId": -1, "filters": {"name": "ALPHA"}}).json()[
        "results"
    ] == [{"id": mine, "error": ""}]
    assert [state(client, user, e) for e in (mine, other, theirs)] == ["STATE_ACTIVE", "STATE_PAUSED", "STATE_PAUSED"]
    assert bulk(client, user, "pause", {"experimentIds": [], "projectId": -1, "filters": {"name": "alpha"}}).json()[
        "results"
    ] == [{"id": mine, "error": ""}]
    r = bulk(client, user, "kill", {"experimentIds": [], "projectId": -1, "filters": {"name": "alpha"}})
    assert r.json()["results"] == [{"id": mine, "error": ""}]
    # archive takes ended experiments only; the killed one is the only match
    r = bulk(client, user, "archive", {"experimentIds": [], "projectId": -1, "filters": {}})
    assert r.json()["results"] == [{"id": mine, "error": ""}]
    # an admin's filter reaches everyone's; excludedExperimentIds and states narrow it
    r = bulk(
        client,
        admin,
        "kill",
        {"experimentIds": [], "filters": {"excludedExperimentIds": [other], "states": ["STATE_PAUSED"]}},
    )
    assert r.json()["results"] == [{"id": theirs, "error": ""}]
    assert state(client, user, other) == "STATE_PAUSED"


def test_move_and_delete_in_bulk(client: TestClient, user: dict) -> None:
    ws = workspace(client, user, "Vision")["id"]
    pid = project(client, user, ws, "Detection")
    a, b = (experiment(client, user, 1).json()["experiment"]["id"] for _ in range(2))
    r = bulk(client, user, "move", {"experimentIds": [a, b], "projectId": 1, "destinationProjectId": pid}, 1)
    assert r.status_code == 200 and [x["error"] for x in r.json()["results"]] == ["", ""]
    assert {
        e["id"] for e in client.get(f"/api/v1/experiments?projectId={pid}", headers=user).json()["experiments"]
    } == {a, b}
    bulk(client, user, "kill", {"experimentIds": [a]})
    r = bulk(client, user, "delete", {"experimentIds": [a, b], "projectId": pid}, pid)
    results = {x["id"]: x["error"] for x in r.json()["results"]}
    assert results[a] == "" and "PAUSED" in results[b]
    assert state(client, user, b) == "STATE_PAUSED"


def test_refusals_name_the_field_and_change_nothing(
    client: TestClient, user: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = [experiment(client, user, 1).json()["experiment"]["id"] for _ in range(3)]
    for body, field in (
        ({"experimentIds": list(range(1, experiment_bulk.MAX_IDS + 2))}, "experimentIds"),
        ({"experimentIds": ids, "projectId": 5}, "projectId"),
        ({"experimentIds": "x"}, "experimentIds"),
        ({"experimentIds": [2**40]}, "experimentIds"),
        ({"experimentIds": [], "filters": {"name": 3}}, "filters.name"),
    ):
        r = bulk(client, user, "activate", body)
        assert r.status_code == 400 and field in r.json()["message"], (body, r.text)
    r = bulk(client, user, "move", {"experimentIds": ids})
    assert r.status_code == 400 and "destinationProjectId" in r.json()["message"]
    monkeypatch.setattr(experiment_bulk, "MAX_FILTERED", 2)
    r = bulk(client, user, "activate", {"experimentIds": [], "filters": {}})
    assert r.status_code == 400 and r.json()["message"].startswith("filters"), r.text
    assert [state(client, user, e) for e in ids] == ["STATE_PAUSED"] * 3
    assert client.post("/api/v1/projects/1/experiments/explode", content="{}", headers=user).status_code in (404, 405)
