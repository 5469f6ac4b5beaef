"""`pedl project list|create|describe` and `pedl experiment create --project` against the fake master."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.fake_master import FakeMaster, Recorded, experiment, page
from tests.cli.test_workspaces import by_name, project, workspace

CONFIG = "name: p\nentrypoint: python3 train.py\nsearcher: {name: single, metric: loss, max_length: 1}\n"


def serve(master: FakeMaster) -> None:
    master.route("GET", "/api/v1/workspaces", by_name([workspace(1, "Uncategorized"), workspace(2, "Vision")]))

    def projects(req: Recorded) -> dict:
        rows = [project(5, "Detection"), project(6, "Tracking")]
        return page("projects", [p for p in rows if not req.q("name") or p["name"].lower() == req.q("name").lower()])

    master.route("GET", "/api/v1/workspaces/2/projects", projects)


def test_list_a_workspaces_projects(cli, master: FakeMaster) -> None:
    serve(master)
    result = cli("project", "list", "Vision")
    assert result.exit_code == 0, result.output
    assert "Detection" in result.stdout and "Tracking" in result.stdout
    assert [p["id"] for p in json.loads(cli("project", "list", "Vision", "--json").stdout)] == [5, 6]


def test_create_sends_dets_body(cli, master: FakeMaster) -> None:
    serve(master)
    master.route("POST", "/api/v1/workspaces/2/projects", {"project": project(7, "Pose")})
    result = cli("project", "create", "Vision", "Pose", "--description", "keypoints", "--key", "POSE")
    assert result.exit_code == 0, result.output
    assert "Created project Pose (id 7) in workspace Vision" in result.stdout and "--project 7" in result.stdout
    assert master.calls("POST", "/api/v1/workspaces/2/projects")[0].json == {
        "name": "Pose",
        "workspaceId": 2,
        "description": "keypoints",
        "key": "POSE",
    }


def test_describe_lists_the_projects_experiments(cli, master: FakeMaster) -> None:
    serve(master)
    master.route("GET", "/api/v1/experiments", page("experiments", [experiment(9, projectId=5)]))
    result = cli("project", "describe", "Vision", "detection")
    assert result.exit_code == 0, result.output
    assert "Project Detection" in result.stdout and "exp-9" in result.stdout
    assert master.calls("GET", "/api/v1/experiments")[0].q("projectId") == "5"
    missing = cli("project", "describe", "Vision", "Pose")
    assert missing.exit_code == 1 and "has no project named 'Pose'" in missing.output


def test_experiment_create_sends_the_project(cli, master: FakeMaster, tmp_path: Path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text("pass\n")
    (tmp_path / "exp.yaml").write_text(CONFIG)
    master.route("POST", "/api/v1/experiments", {"experiment": experiment(3, projectId=5), "config": {}})
    result = cli("experiment", "create", "--project", "5", str(tmp_path / "exp.yaml"), str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    body = master.calls("POST", "/api/v1/experiments")[0].json
    assert body["projectId"] == 5 and body["template"] is None
    master.route(
        "POST", "/api/v1/experiments", (404, {"message": "projectId: project 99 not found", "pedlCode": "not_found"})
    )
    refused = cli("experiment", "create", "--project", "99", str(tmp_path / "exp.yaml"), str(tmp_path / "model"))
    assert refused.exit_code == 1 and "projectId: project 99 not found" in refused.output
