"""`pedl workspace list|create|describe` against the fake master."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster, Recorded, page


def workspace(ws_id: int, name: str, **extra: object) -> dict:
    return {
        "id": ws_id,
        "name": name,
        "numProjects": 1,
        "numExperiments": 3,
        "username": "admin",
        "immutable": ws_id == 1,
        **extra,
    }


def project(pid: int, name: str, ws_id: int = 2) -> dict:
    return {
        "id": pid,
        "name": name,
        "key": name[:5].upper(),
        "description": "d",
        "workspaceId": ws_id,
        "workspaceName": "Vision",
        "numExperiments": 2,
        "numActiveExperiments": 1,
        "username": "determined",
    }


def by_name(workspaces: list[dict]):
    def reply(req: Recorded) -> dict:
        wanted = (req.q("name") or "").casefold()
        return page("workspaces", [w for w in workspaces if not wanted or w["name"].casefold() == wanted])

    return reply


def test_list_is_a_table_and_json(cli, master: FakeMaster) -> None:
    master.route(
        "GET", "/api/v1/workspaces", page("workspaces", [workspace(1, "Uncategorized"), workspace(2, "Vision")])
    )
    result = cli("workspace", "list")
    assert result.exit_code == 0, result.output
    assert "Uncategorized" in result.stdout and "Vision" in result.stdout and "Projects" in result.stdout
    assert [w["name"] for w in json.loads(cli("workspace", "list", "--json").stdout)] == ["Uncategorized", "Vision"]
    assert master.calls("GET", "/api/v1/workspaces")[0].q("limit") == "200"  # paged


def test_create_sends_the_name(cli, master: FakeMaster) -> None:
    master.route("POST", "/api/v1/workspaces", {"workspace": workspace(2, "Vision")})
    result = cli("workspace", "create", "Vision")
    assert result.exit_code == 0, result.output
    assert "Created workspace Vision (id 2)" in result.stdout
    assert master.calls("POST", "/api/v1/workspaces")[0].json == {"name": "Vision"}


def test_a_taken_name_is_the_masters_message(cli, master: FakeMaster) -> None:
    master.route(
        "POST",
        "/api/v1/workspaces",
        (409, {"message": "name: a workspace named 'Vision' exists already", "pedlCode": "conflict"}),
    )
    result = cli("workspace", "create", "Vision")
    assert result.exit_code == 1 and "exists already" in result.output


def test_describe_shows_the_workspace_and_its_projects(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/workspaces", by_name([workspace(1, "Uncategorized"), workspace(2, "Vision")]))
    master.route("GET", "/api/v1/workspaces/2/projects", page("projects", [project(5, "Detection")]))
    result = cli("workspace", "describe", "vision")
    assert result.exit_code == 0, result.output
    assert "Workspace Vision" in result.stdout and "Detection" in result.stdout and "DETEC" in result.stdout
    assert master.calls("GET", "/api/v1/workspaces")[0].q("name") == "vision"
    got = json.loads(cli("workspace", "describe", "Vision", "--json").stdout)
    assert got["workspace"]["id"] == 2 and [p["id"] for p in got["projects"]] == [5]
    missing = cli("workspace", "describe", "Audio")
    assert missing.exit_code == 1 and "no workspace named 'Audio'" in missing.output
