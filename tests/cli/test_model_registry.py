"""`pedl model ...` against a fake master: what each command sends and what it prints."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster, page

MODEL = {
    "id": 4,
    "name": "resnet",
    "description": "the good one",
    "metadata": {"k": 1},
    "labels": ["prod"],
    "creationTime": "2025-01-01T00:00:00Z",
    "lastUpdatedTime": "2025-01-02T00:00:00Z",
    "archived": False,
    "numVersions": 2,
    "userId": 2,
    "username": "determined",
    "workspaceId": 1,
    "notes": "",
}
VERSION = {
    "id": 9,
    "version": 2,
    "model": MODEL,
    "name": "v2",
    "comment": "",
    "notes": "",
    "metadata": {},
    "labels": [],
    "userId": 2,
    "username": "determined",
    "creationTime": "2025-01-02T00:00:00Z",
    "lastUpdatedTime": "2025-01-02T00:00:00Z",
    "checkpoint": {
        "uuid": "ck-2",
        "state": "STATE_COMPLETED",
        "metadata": {"steps_completed": 30},
        "resources": {},
        "training": {"trialId": 7, "experimentId": 3},
    },
}


def test_create_sends_name_description_labels(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/models", {"model": MODEL})
    result = cli("model", "create", "resnet", "--description", "the good one", "-l", "prod")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", "/api/v1/models")
    assert req.json == {"name": "resnet", "description": "the good one", "labels": ["prod"], "workspaceName": None}
    assert "Created model 'resnet' (id 4)" in result.stdout


def test_list_sends_filters_and_prints_a_table(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/models", page("models", [MODEL]))
    result = cli(
        "model",
        "list",
        "--name",
        "res",
        "--label",
        "prod",
        "--unarchived",
        "--sort-by",
        "num_versions",
        "--desc",
        "-w",
        "team",
    )
    assert result.exit_code == 0, result.output
    (req,) = master.calls("GET", "/api/v1/models")
    assert (
        req.q("name"),
        req.query["labels"],
        req.q("archived"),
        req.q("sortBy"),
        req.q("orderBy"),
        req.query["workspaceNames"],
    ) == ("res", ["prod"], "false", "SORT_BY_NUM_VERSIONS", "ORDER_BY_DESC", ["team"])
    for text in ("resnet", "the good one", "prod", "determined"):
        assert text in result.stdout, text
    assert json.loads(cli("model", "list", "--json").stdout) == [MODEL]
    bad = cli("model", "list", "--sort-by", "size")
    assert bad.exit_code != 0 and "--sort-by" in bad.output


def test_describe_shows_the_model_and_its_latest_version(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/models/resnet", {"model": MODEL})
    master.route("GET", "/api/v1/models/resnet/versions", page("modelVersions", [VERSION]))
    result = cli("model", "describe", "resnet")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("GET", "/api/v1/models/resnet/versions")
    assert (req.q("limit"), req.q("sortBy"), req.q("orderBy")) == ("1", "SORT_BY_VERSION", "ORDER_BY_DESC")
    for text in ("the good one", '"k": 1', "Latest version", "ck-2", "COMPLETED", "30"):
        assert text in result.stdout, text
    assert json.loads(cli("model", "describe", "resnet", "--json").stdout) == {"model": MODEL, "latestVersion": VERSION}


def test_list_versions(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/models/resnet/versions", page("modelVersions", [VERSION]))
    result = cli("model", "list-versions", "resnet")
    assert result.exit_code == 0, result.output
    assert "ck-2" in result.stdout and "v2" in result.stdout
    assert json.loads(cli("model", "list-versions", "resnet", "--json").stdout) == [VERSION]


def test_register_version(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/models/resnet/versions", {"modelVersion": VERSION})
    result = cli("model", "register-version", "resnet", "ck-2", "--name", "v2")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("POST", "/api/v1/models/resnet/versions")
    assert req.json == {"checkpointUuid": "ck-2", "name": "v2"}
    assert "as version 2 of model 'resnet'" in result.stdout


def test_a_refused_registration_prints_the_masters_reason(cli, master: FakeMaster) -> None:
    message = "checkpointUuid: checkpoint ck-1 was deleted (STATE_DELETED)"
    master.route(
        "POST",
        "/api/v1/models/resnet/versions",
        (
            400,
            {
                "message": message,
                "pedlCode": "invalid_argument",
                "fields": [{"field": "checkpointUuid", "message": "deleted"}],
            },
        ),
    )
    result = cli("model", "register-version", "resnet", "ck-1")
    assert result.exit_code == 1 and message in result.output


def test_names_are_quoted_in_the_path(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/models/my%20model/archive", {})
    master.route("POST", "/api/v1/models/my%20model/unarchive", {})
    assert cli("model", "archive", "my model").exit_code == 0
    assert cli("model", "unarchive", "my model").exit_code == 0
    assert [r.path for r in master.requests if r.method == "POST" and "models" in r.path] == [
        "/api/v1/models/my%20model/archive",
        "/api/v1/models/my%20model/unarchive",
    ]


def test_delete_asks_first(cli, master: FakeMaster) -> None:
    master.route("DELETE", "/api/v1/models/resnet", {})
    master.route("DELETE", "/api/v1/models/resnet/versions/2", {})
    assert cli("model", "delete", "resnet", input="n\n").exit_code == 1
    assert master.calls("DELETE", "/api/v1/models/resnet") == []
    assert cli("model", "delete", "resnet", input="y\n").exit_code == 0
    assert len(master.calls("DELETE", "/api/v1/models/resnet")) == 1
    result = cli("model", "delete-version", "resnet", "2", "--yes")
    assert result.exit_code == 0 and "Deleted version 2" in result.stdout
    assert len(master.calls("DELETE", "/api/v1/models/resnet/versions/2")) == 1


def test_move(cli, master: FakeMaster) -> None:
    master.route("PATCH", "/api/v1/models/resnet", {"model": {**MODEL, "workspaceId": 5}})
    result = cli("model", "move", "resnet", "-w", "team")
    assert result.exit_code == 0, result.output
    (req,) = master.calls("PATCH", "/api/v1/models/resnet")
    assert req.json == {"workspaceName": "team"} and "(id 5)" in result.stdout
