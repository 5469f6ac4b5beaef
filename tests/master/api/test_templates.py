"""Templates over the API, the way det uses them (set = GET, then PATCH or POST; list; describe;
remove), and experiments created with one."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.master.fakes import FakeAgent, file_entry, post
from tests.master.other_users import make_user

TEMPLATE = {
    "searcher": {"name": "single", "metric": "loss", "max_length": 5},
    "max_restarts": 2,
    "resources": {"priority": 7},
    "labels": ["from-template"],
}
CONFIG = "name: templated\nentrypoint: python train.py\nsearcher: {max_length: 9}\nlabels: [mine]\n"


def create(client: TestClient, headers: dict, path_name: str, config: object = TEMPLATE, **body: object):
    return post(
        client,
        f"/api/v1/templates/{path_name}",
        {"name": path_name, "config": config, "workspaceId": 0, **body},
        headers,
    )


def patch(client: TestClient, headers: dict, name: str, config: object):
    return client.patch(f"/api/v1/templates/{name}", content=json.dumps(config), headers=headers)


def experiment(client: TestClient, headers: dict, template: str | None, config: str = CONFIG, **body: object):
    return post(
        client,
        "/api/v1/experiments",
        {
            "activate": False,
            "config": config,
            "parentId": None,
            "modelDefinition": [file_entry("train.py", b"x\n")],
            "projectId": None,
            "template": template,
            "validateOnly": False,
            **body,
        },
        headers,
    )


def total_experiments(client: TestClient, headers: dict) -> int:
    return client.get("/api/v1/experiments", headers=headers).json()["pagination"]["total"]


def test_set_list_describe_and_remove(client: TestClient, user: dict) -> None:
    assert client.get("/api/v1/templates/base", headers=user).status_code == 404  # det set: GET first
    r = create(client, user, "base")
    assert r.status_code == 200, r.text
    assert r.json()["template"] == {
        "name": "base",
        "config": TEMPLATE,
        "workspaceId": 1,
        "userId": 2,
        "username": "determined",
    }
    assert create(client, user, "other", {"max_restarts": 0}).status_code == 200
    body = client.get("/api/v1/templates", headers=user).json()
    assert [t["name"] for t in body["templates"]] == ["base", "other"]
    assert body["pagination"]["total"] == 2
    assert [t["name"] for t in client.get("/api/v1/templates?name=OTH", headers=user).json()["templates"]] == ["other"]
    r = patch(client, user, "base", {"max_restarts": 1})  # det set, when GET found it
    assert r.status_code == 200 and r.json()["template"]["config"] == {"max_restarts": 1}
    assert client.get("/api/v1/templates/base", headers=user).json()["template"]["config"] == {"max_restarts": 1}
    assert client.delete("/api/v1/templates/base", headers=user).status_code == 200
    assert client.get("/api/v1/templates/base", headers=user).status_code == 404
    assert client.delete("/api/v1/templates/base", headers=user).status_code == 404


def test_only_the_owner_or_an_admin_changes_a_template(client: TestClient, user: dict, admin: dict) -> None:
    assert create(client, admin, "admins").status_code == 200
    r = patch(client, user, "admins", {"max_restarts": 0})
    assert r.status_code == 403 and "owner" in r.json()["message"]
    assert client.delete("/api/v1/templates/admins", headers=user).status_code == 403
    assert client.get("/api/v1/templates/admins", headers=user).json()["template"]["config"] == TEMPLATE
    assert create(client, user, "users").status_code == 200
    assert patch(client, admin, "users", {"max_restarts": 3}).status_code == 200


def test_refusals_name_the_field_and_store_nothing(client: TestClient, user: dict) -> None:
    assert create(client, user, "taken").status_code == 200
    for path_name, body, status, field in [
        ("taken", {}, 409, "'taken'"),
        ("t", {"config": ["a list"]}, 400, "config"),
        ("t", {"config": {"entrypoint": "x", "bogus": 1}}, 400, "config.bogus"),
        ("t", {"config": {"data": {"x": "a\u0000b"}}}, 400, "config.data.x"),
        ("t", {"name": "u"}, 400, "name"),
        ("t", {"workspaceId": 42}, 404, "workspaceId"),
    ]:
        r = create(client, user, path_name, **body)
        assert r.status_code == status and field in r.json()["message"], (body, r.text)
    r = patch(client, user, "taken", ["not", "a", "mapping"])
    assert r.status_code == 400 and r.json()["message"].startswith("config")
    assert [t["name"] for t in client.get("/api/v1/templates", headers=user).json()["templates"]] == ["taken"]
    assert client.get("/api/v1/templates/taken", headers=user).json()["template"]["config"] == TEMPLATE
    assert patch(client, user, "nope", {}).status_code == 404


def test_an_experiment_gets_the_template_merged_under_its_config(client: TestClient, user: dict) -> None:
    assert create(client, user, "base").status_code == 200
    r = experiment(client, user, "base")
    assert r.status_code == 200, r.text
    config = r.json()["config"]
    assert config["searcher"]["name"] == "single" and config["searcher"]["metric"] == "loss"  # the template's
    assert config["searcher"]["max_length"]["batches"] == 9  # the experiment's wins
    assert config["labels"] == ["mine"] and config["max_restarts"] == 2 and config["resources"]["priority"] == 7
    exp = r.json()["experiment"]
    stored = client.get(f"/api/v1/experiments/{exp['id']}", headers=user).json()
    assert stored["config"] == config and stored["experiment"]["originalConfig"] == CONFIG
    validated = experiment(client, user, "base", validateOnly=True)
    assert validated.status_code == 200 and validated.json()["config"]["max_restarts"] == 2


def test_an_unknown_template_or_a_bad_merge_is_refused_and_nothing_stored(client: TestClient, user: dict) -> None:
    r = experiment(client, user, "nope")
    assert r.status_code == 404 and r.json()["message"].startswith("template") and "'nope'" in r.json()["message"]
    assert create(client, user, "bad", {"max_restarts": -1}).status_code == 200  # only the merge says
    r = experiment(client, user, "bad")
    assert r.status_code == 400 and "max_restarts" in r.json()["message"], r.text
    assert total_experiments(client, user) == 0


def test_a_template_runs_only_as_its_owner_or_from_an_admin(
    client: TestClient, user: dict, admin: dict, agent: FakeAgent
) -> None:
    """A template's config (variables, mounts, image) runs as whoever names it: bob's, named by alice (or by
    an admin), would run bob's choices with their tokens. Refused with a 403 naming the field, for an
    experiment and for a task; an admin's template, or one's own, is usable by all."""
    bob, alice = make_user(client, admin, "bob"), make_user(client, admin, "alice")
    evil = {
        **TEMPLATE,
        "environment": {"environment_variables": ["PYTHONPATH=/home/bob/evil"]},
        "bind_mounts": [{"host_path": "/home/bob", "container_path": "/usr/lib/python3"}],
    }
    assert create(client, bob, "bobs", evil).status_code == 200
    assert create(client, admin, "team", {"environment": {"environment_variables": ["TEAM=1"]}}).status_code == 200
    before = total_experiments(client, admin)
    for headers in (alice, admin):
        r = experiment(client, headers, "bobs")
        assert r.status_code == 403 and r.json()["fields"][0]["field"] == "template", r.text
        assert "belongs to bob" in r.json()["message"]
        r = post(client, "/api/v1/commands", {"config": {"entrypoint": ["true"]}, "templateName": "bobs"}, headers)
        assert r.status_code == 403 and r.json()["fields"][0]["field"] == "templateName", r.text
    assert total_experiments(client, admin) == before and agent.start_all() == []
    assert experiment(client, bob, "bobs").status_code == 200  # his own
    r = post(client, "/api/v1/commands", {"config": {"entrypoint": ["true"]}, "templateName": "team"}, alice)
    assert r.status_code == 200, r.text  # an admin's
    [task] = agent.start_all()
    assert task.message["env"]["TEAM"] == "1"
