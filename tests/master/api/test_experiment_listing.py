"""The experiments listing the WebUI pages through: filters by name, label, state and user, sorting
on the server, the counts and best metric of each row; and the edits an owner may make (archive,
unarchive, name, description, notes, labels, one label at a time as Determined's SDK does, priority
and weight)."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import select

from tests.master.fakes import GRID_CONFIG, SINGLE_CONFIG, FakeAgent, bearer, create_experiment, post


def config(name: str, labels: list[str] | None = None) -> str:
    text = SINGLE_CONFIG.replace("name: single-exp", f"name: {name}")
    return text + (f"labels: {labels!r}\n" if labels else "")


def names(client: TestClient, headers: dict, **params) -> list[str]:
    r = client.get("/api/v1/experiments", params=params, headers=headers)
    assert r.status_code == 200, r.text
    return [e["name"] for e in r.json()["experiments"]]


@pytest.fixture
def three(client: TestClient, admin: dict, user: dict) -> dict[str, int]:
    made = {
        "alpha-net": create_experiment(client, admin, config("alpha-net", ["vision", "50%_off"])),
        "Beta-net": create_experiment(client, user, config("Beta-net", ["nlp"])),
        "gamma": create_experiment(client, admin, config("gamma", ["vision-large"])),
    }
    return {name: e["id"] for name, e in made.items()}


def test_name_search_is_a_part_of_the_name_in_any_case(client: TestClient, admin: dict, three: dict) -> None:
    assert names(client, admin, name="NET") == ["alpha-net", "Beta-net"]
    assert names(client, admin, name="%") == []  # LIKE's wildcards are matched as themselves


def test_labels_match_whole_labels_any_of_them(client: TestClient, admin: dict, three: dict) -> None:
    assert names(client, admin, labels="vision") == ["alpha-net"]  # not vision-large
    assert names(client, admin, labels=["nlp", "vision-large"]) == ["Beta-net", "gamma"]
    assert names(client, admin, labels="50%_off") == ["alpha-net"]
    assert names(client, admin, labels="50") == []
    shown = client.get(f"/api/v1/experiments/{three['alpha-net']}", headers=admin).json()["experiment"]
    assert shown["labels"] == ["vision", "50%_off"]


def test_users_and_states_filter(client: TestClient, admin: dict, three: dict) -> None:
    assert names(client, admin, users="determined") == ["Beta-net"]
    assert post(client, f"/api/v1/experiments/{three['gamma']}/kill", None, admin).status_code == 200
    assert names(client, admin, states="STATE_CANCELED") == ["gamma"]


@pytest.mark.parametrize(
    ("sort", "order", "expected"),
    [
        ("SORT_BY_NAME", "ORDER_BY_ASC", ["Beta-net", "alpha-net", "gamma"]),  # the database's own collation
        ("SORT_BY_ID", "ORDER_BY_DESC", ["gamma", "Beta-net", "alpha-net"]),
        ("SORT_BY_USER", "ORDER_BY_ASC", ["alpha-net", "gamma", "Beta-net"]),  # admin before determined
    ],
)
def test_sorting_is_done_by_the_server(
    client: TestClient, admin: dict, three: dict, sort: str, order: str, expected: list[str]
) -> None:
    got = names(client, admin, sortBy=sort, orderBy=order)
    if sort == "SORT_BY_NAME":
        assert sorted(got, key=str.lower) == sorted(expected, key=str.lower) and got[-1] == "gamma"
    else:
        assert got == expected


@pytest.fixture
def scored(app: FastAPI, client: TestClient, admin: dict) -> dict[str, int]:
    """Four experiments whose best searcher metrics are 0.2, 0.5 (smaller is better: not its 0.95)
    and 0.9 (larger is better: not its 0.1), and one with no validation yet."""
    grid_larger = GRID_CONFIG.replace("  metric: loss\n", "  metric: loss\n  smaller_is_better: false\n")
    losses = {"low": [0.2], "mid": [0.5, 0.95], "high": [0.1, 0.9], "none": []}
    made = {
        "low": create_experiment(client, admin, config("low")),
        "mid": create_experiment(client, admin, GRID_CONFIG.replace("name: grid-exp", "name: mid")),
        "high": create_experiment(client, admin, grid_larger.replace("name: grid-exp", "name: high")),
        "none": create_experiment(client, admin, config("none")),
    }
    fake = FakeAgent(app, "agent-scored", slots=6)
    try:
        tasks = {t.trial_id: t for t in fake.start_all()}
        for name, exp in made.items():
            trials = client.get(f"/api/v1/experiments/{exp['id']}/trials", headers=admin).json()["trials"]
            for trial, loss in zip(sorted(t["id"] for t in trials), losses[name], strict=False):
                body = {
                    "group": "validation",
                    "metrics": {
                        "trialId": trial,
                        "trialRunId": 1,
                        "stepsCompleted": 5,
                        "metrics": {"avgMetrics": {"loss": loss}},
                    },
                }
                r = post(client, f"/api/v1/trials/{trial}/metrics", body, bearer(tasks[trial].token))
                assert r.status_code == 200, r.text
        yield {name: e["id"] for name, e in made.items()}
    finally:
        fake.close()


@pytest.mark.parametrize(
    ("order", "expected"),
    [
        ("ORDER_BY_ASC", ["low", "mid", "high", "none"]),
        ("ORDER_BY_DESC", ["high", "mid", "low", "none"]),  # no metric: last either way
    ],
)
def test_sorting_by_the_best_searcher_metric(
    client: TestClient, admin: dict, scored: dict, order: str, expected: list[str]
) -> None:
    r = client.get(
        "/api/v1/experiments", params={"sortBy": "SORT_BY_SEARCHER_METRIC_VAL", "orderBy": order}, headers=admin
    )
    assert r.status_code == 200, r.text
    rows = r.json()["experiments"]
    assert [e["name"] for e in rows] == expected
    best = {"low": 0.2, "mid": 0.5, "high": 0.9}  # what the rows show is what they are sorted by
    assert [e["bestTrialSearcherMetric"] for e in rows[:3]] == pytest.approx([best[n] for n in expected[:3]])
    assert rows[3]["bestTrialSearcherMetric"] is None
    page = client.get(
        "/api/v1/experiments",
        headers=admin,
        params={"sortBy": "SORT_BY_SEARCHER_METRIC_VAL", "orderBy": order, "limit": 2, "offset": 1},
    ).json()["experiments"]
    assert [e["name"] for e in page] == expected[1:3]


def test_pages_and_an_unknown_sort(client: TestClient, admin: dict, three: dict) -> None:
    r = client.get("/api/v1/experiments", params={"limit": 2, "offset": 1}, headers=admin).json()
    assert [e["name"] for e in r["experiments"]] == ["Beta-net", "gamma"]
    assert r["pagination"]["total"] == 3 and r["pagination"]["endIndex"] == 3
    bad = client.get("/api/v1/experiments", params={"sortBy": "SORT_BY_SHOE_SIZE"}, headers=admin)
    assert bad.status_code == 400 and "sortBy" in bad.json()["message"]


def test_rows_carry_trial_counts(client: TestClient, admin: dict) -> None:
    exp = create_experiment(client, admin)  # grid: two trials, queued (no agent)
    shown = client.get(f"/api/v1/experiments/{exp['id']}", headers=admin).json()["experiment"]
    assert (shown["numTrials"], shown["activeTrials"]) == (2, 2)
    assert shown["bestTrialSearcherMetric"] is None


def test_archive_needs_an_ended_experiment_and_its_owner(
    client: TestClient, admin: dict, user: dict, three: dict
) -> None:
    exp_id = three["alpha-net"]
    active = post(client, f"/api/v1/experiments/{exp_id}/archive", None, admin)
    assert active.status_code == 409 and "ended" in active.json()["message"]
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, admin).status_code == 200
    assert post(client, f"/api/v1/experiments/{exp_id}/archive", None, user).status_code == 403
    assert post(client, f"/api/v1/experiments/{exp_id}/archive", None, admin).status_code == 200
    assert names(client, admin, archived="false") == ["Beta-net", "gamma"]
    assert post(client, f"/api/v1/experiments/{exp_id}/unarchive", None, admin).status_code == 200
    assert "alpha-net" in names(client, admin, archived="false")


def test_an_owner_edits_name_description_notes_and_labels(
    client: TestClient, admin: dict, user: dict, three: dict
) -> None:
    exp_id = three["Beta-net"]
    r = client.patch(
        f"/api/v1/experiments/{exp_id}",
        headers=user,
        json={"name": "renamed", "description": "d", "notes": "n", "labels": ["a", "b", "a"]},
    )
    assert r.status_code == 200, r.text
    shown = r.json()["experiment"]
    assert (shown["name"], shown["description"], shown["notes"], shown["labels"]) == ("renamed", "d", "n", ["a", "b"])
    assert shown["config"]["labels"] == ["a", "b"] and shown["config"]["description"] == "d"
    assert names(client, admin, labels="b") == ["renamed"]
    other = client.patch(f"/api/v1/experiments/{three['gamma']}", headers=user, json={"description": "x"})
    assert other.status_code == 403
    assert client.get(f"/api/v1/experiments/{three['gamma']}", headers=admin).json()["experiment"]["description"] != "x"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "   "}, "name"),
        ({"labels": ["ok", ""]}, "labels[1]"),
        ({"labels": ["two\nlines"]}, "labels[0]"),
        ({"labels": "not-a-list"}, "labels"),
        ({"description": "x" * 70_000}, "description"),
        ({"name": "fine", "resources": {"priority": 0}}, "resources.priority"),
        ({"resources": {"priority": 100}}, "resources.priority"),
        ({"resources": {"priority": "high"}}, "resources.priority"),
        ({"resources": {"weight": 0}}, "resources.weight"),
        ({"description": "fine", "resources": {"maxSlots": -1}}, "resources.maxSlots"),
        ({"description": "fine", "resources": {"maxSlots": 0}}, "resources.maxSlots"),  # below slots_per_trial
    ],
)
def test_bad_edits_name_the_field_and_change_nothing(
    client: TestClient, admin: dict, three: dict, body: dict, field: str
) -> None:
    exp_id = three["gamma"]
    before = client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"]
    r = client.patch(f"/api/v1/experiments/{exp_id}", headers=admin, json=body)
    assert r.status_code == 400 and field in r.json()["message"], r.text
    assert client.get(f"/api/v1/experiments/{exp_id}", headers=admin).json()["experiment"] == before


def test_priority_and_weight_change_the_config_and_the_live_allocations(
    app: FastAPI, client: TestClient, user: dict
) -> None:
    from pedl.master.db import models
    from tests.master.fakes import ctx_of

    exp = create_experiment(client, user, GRID_CONFIG)  # two trials; no agent: both wait
    r = client.patch(
        f"/api/v1/experiments/{exp['id']}",
        headers=user,
        json={"id": exp["id"], "resources": {"priority": 7, "weight": 2.5}},
    )  # as det sends it
    assert r.status_code == 200, r.text
    config = client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()["config"]
    assert config["resources"]["priority"] == 7 and config["resources"]["weight"] == 2.5
    with ctx_of(app).db.read_session() as s:
        priorities = list(
            s.scalars(
                select(models.Allocation.priority)
                .join(models.Trial, models.Trial.id == models.Allocation.trial_id)
                .where(models.Trial.experiment_id == exp["id"])
            )
        )
    assert priorities and set(priorities) == {7}


def test_one_label_is_added_and_removed_as_the_sdk_does(
    client: TestClient, admin: dict, user: dict, three: dict
) -> None:
    exp_id = three["Beta-net"]  # labels: nlp
    url = f"/api/v1/experiments/{exp_id}/labels"
    r = client.put(f"{url}/vision", headers=user)
    assert r.status_code == 200 and r.json() == {"labels": ["nlp", "vision"]}, r.text
    assert client.put(f"{url}/vision", headers=user).json() == {"labels": ["nlp", "vision"]}  # no twice
    assert set(names(client, admin, labels="vision")) == {"Beta-net", "alpha-net"}
    r = client.delete(f"{url}/nlp", headers=user)
    assert r.status_code == 200 and r.json() == {"labels": ["vision"]}, r.text
    assert client.delete(f"{url}/absent", headers=user).json() == {"labels": ["vision"]}
    shown = client.get(f"/api/v1/experiments/{exp_id}", headers=user).json()["experiment"]
    assert shown["labels"] == ["vision"] and shown["config"]["labels"] == ["vision"]
    assert client.put(f"/api/v1/experiments/{three['gamma']}/labels/x", headers=user).status_code == 403
    assert client.put(f"{url}/{'x' * 300}", headers=user).status_code == 400
    assert client.put("/api/v1/experiments/999/labels/x", headers=user).status_code == 404
