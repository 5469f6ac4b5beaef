"""A user who may edit an experiment reports a trial's metrics with a login token (Determined's SDK on
a paused experiment); GET /api/v1/trials/time-series (Determined's CompareTrials) reads them back by
"group.name", custom groups included; bad requests name the field."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from pedl.master.identity.passwords import client_hash
from tests.master.fakes import SINGLE_CONFIG, bearer, create_experiment, login, post

SERIES = "/api/v1/trials/time-series"


def paused_trial(client: TestClient, headers: dict) -> int:
    exp = create_experiment(client, headers, SINGLE_CONFIG, activate=False)
    return client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=headers).json()["trials"][0]["id"]


def report(client: TestClient, headers: dict, trial_id: int, group: str, step: int, values: dict):
    body = {
        "group": group,
        "metrics": {"trialId": trial_id, "trialRunId": 0, "stepsCompleted": step, "metrics": {"avgMetrics": values}},
    }
    return post(client, f"/api/v1/trials/{trial_id}/metrics", body, headers)


@pytest.mark.parametrize("group", ["validation", "training", "abc"])
def test_a_users_report_reads_back_by_group_and_name(client: TestClient, user: dict, group: str) -> None:
    trial_id = paused_trial(client, user)
    r = report(client, user, trial_id, group, 10, {"lossx": 3.3, "other": 1})
    assert r.status_code == 200, r.text
    assert report(client, user, trial_id, group, 20, {"lossx": 2.2}).status_code == 200
    r = client.get(SERIES, params={"trialIds": [trial_id], "metricIds": [f"{group}.lossx"]}, headers=user)
    assert r.status_code == 200, r.text
    [entry] = r.json()["trials"]
    assert entry["trial"]["id"] == trial_id
    [series] = entry["metrics"]
    assert series["group"] == group
    assert series["type"] == {"training": "METRIC_TYPE_TRAINING", "validation": "METRIC_TYPE_VALIDATION"}.get(
        group, "METRIC_TYPE_UNSPECIFIED"
    )
    assert [(p["batches"], p["values"]) for p in series["data"]] == [(10, {"lossx": 3.3}), (20, {"lossx": 2.2})]
    assert all(p["time"] for p in series["data"])


def test_only_a_user_who_may_edit_the_experiment_reports(client: TestClient, user: dict, admin: dict) -> None:
    trial_id = paused_trial(client, user)
    body = {
        "user": {"username": "carol", "admin": False, "active": True},
        "password": client_hash("pw-carol"),
        "isHashed": True,
    }
    assert post(client, "/api/v1/users", body, admin).status_code == 200
    carol = bearer(login(client, "carol", "pw-carol"))
    r = report(client, carol, trial_id, "training", 1, {"x": 1})
    assert r.status_code == 403 and "owner" in r.json()["message"], r.text
    assert report(client, admin, trial_id, "training", 1, {"x": 1}).status_code == 200
    assert report(client, user, 999_999, "training", 1, {"x": 1}).status_code == 404


def test_metric_names_of_a_group_and_the_batch_window(client: TestClient, user: dict) -> None:
    trial_id = paused_trial(client, user)
    for step in (1, 2, 3):
        assert report(client, user, trial_id, "validation", step, {"a": step, "b": -step}).status_code == 200
    r = client.get(
        SERIES,
        params={"trialIds": trial_id, "metricNames": ["a", "b"], "group": "validation", "startBatches": 2},
        headers=user,
    )
    assert r.status_code == 200, r.text
    [series] = r.json()["trials"][0]["metrics"]
    assert [(p["batches"], p["values"]) for p in series["data"]] == [(2, {"a": 2, "b": -2}), (3, {"a": 3, "b": -3})]


@pytest.mark.parametrize(
    ("params", "status", "field"),
    [
        ({"trialIds": 1}, 400, "metricIds"),
        ({"trialIds": 1, "metricIds": "nodot"}, 400, "metricIds"),
        ({"metricIds": "training.x"}, 400, "trialIds"),
        ({"trialIds": list(range(1, 102)), "metricIds": "training.x"}, 400, "trialIds"),
        ({"trialIds": 999_999, "metricIds": "training.x"}, 404, "trial 999999"),
    ],
)
def test_bad_requests_name_the_field(client: TestClient, user: dict, params: dict, status: int, field: str) -> None:
    r = client.get(SERIES, params=params, headers=user)
    assert r.status_code == status and field in r.json()["message"], r.text
