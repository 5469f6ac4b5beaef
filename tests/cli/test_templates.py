"""`pedl template set|list|describe|remove` and `pedl experiment create --template` against the fake
master."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.fake_master import FakeMaster, Recorded, experiment, page
from tests.cli.test_workspaces import workspace

TEMPLATE = {"searcher": {"name": "single", "metric": "loss"}, "resources": {"slots_per_trial": 1}}


def stored(master: FakeMaster) -> dict[str, dict]:
    """A fake master that keeps templates the way the real one does."""
    templates: dict[str, dict] = {}

    def get(req: Recorded):
        name = req.path.rsplit("/", 1)[1]
        if name not in templates:
            return 404, {"message": f"template {name!r} not found", "pedlCode": "not_found"}
        return {"template": templates[name]}

    def post(req: Recorded) -> dict:
        templates[req.json["name"]] = {**req.json, "workspaceId": 1, "username": "determined"}
        return {"template": templates[req.json["name"]]}

    def patch(req: Recorded) -> dict:
        templates[req.path.rsplit("/", 1)[1]]["config"] = req.json
        return {"template": templates[req.path.rsplit("/", 1)[1]]}

    for name in ("base", "my tpl"):
        path = f"/api/v1/templates/{name.replace(' ', '%20')}"
        master.route("GET", path, get)
        master.route("POST", path, post)
        master.route("PATCH", path, patch)
        master.route("DELETE", path, lambda req: {})
    master.route("GET", "/api/v1/templates", lambda req: page("templates", list(templates.values())))
    master.route("GET", "/api/v1/workspaces", page("workspaces", [workspace(1, "Uncategorized")]))
    return templates


def test_set_creates_then_replaces_like_det(cli, master: FakeMaster, tmp_path: Path) -> None:
    templates = stored(master)
    path = tmp_path / "tpl.yaml"
    path.write_text(yaml.safe_dump(TEMPLATE))
    result = cli("template", "set", "base", str(path))
    assert result.exit_code == 0, result.output
    assert "Created template base" in result.stdout
    assert master.calls("POST", "/api/v1/templates/base")[0].json == {
        "name": "base",
        "config": TEMPLATE,
        "workspaceId": 0,
    }
    path.write_text("max_restarts: 2\n")
    result = cli("template", "set", "base", str(path))
    assert result.exit_code == 0 and "Set template base" in result.stdout
    assert master.calls("PATCH", "/api/v1/templates/base")[0].json == {"max_restarts": 2}  # the config itself
    assert templates["base"]["config"] == {"max_restarts": 2}
    assert cli("template", "set", "my tpl", str(path)).exit_code == 0  # the name is quoted in the URL
    assert "my tpl" in templates


def test_set_refuses_a_file_that_is_not_a_mapping(cli, master: FakeMaster, tmp_path: Path) -> None:
    stored(master)
    path = tmp_path / "tpl.yaml"
    path.write_text("- a\n- list\n")
    result = cli("template", "set", "base", str(path))
    assert result.exit_code == 1 and "must be a mapping" in result.output
    assert not master.calls("POST", "/api/v1/templates/base")


def test_list_describe_and_remove(cli, master: FakeMaster) -> None:
    templates = stored(master)
    templates["base"] = {"name": "base", "config": TEMPLATE, "workspaceId": 1, "username": "determined"}
    listed = cli("template", "list")
    assert listed.exit_code == 0, listed.output
    assert "base" in listed.stdout and "Uncategorized" in listed.stdout and "slots_per_trial" not in listed.stdout
    assert "slots_per_trial" in cli("template", "list", "--details").stdout
    assert [t["name"] for t in json.loads(cli("template", "list", "--json").stdout)] == ["base"]
    described = cli("template", "describe", "base")
    assert yaml.safe_load(described.stdout) == TEMPLATE
    removed = cli("template", "remove", "base")
    assert removed.exit_code == 0 and "Removed template base" in removed.stdout
    assert len(master.calls("DELETE", "/api/v1/templates/base")) == 1
    missing = cli("template", "describe", "nope")
    assert missing.exit_code == 1


def test_experiment_create_with_a_template_sends_it_and_a_partial_config(
    cli, master: FakeMaster, tmp_path: Path
) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "train.py").write_text("pass\n")
    partial = tmp_path / "exp.yaml"
    partial.write_text("entrypoint: python3 train.py\n")  # no searcher: the template has it
    master.route("POST", "/api/v1/experiments", {"experiment": experiment(4), "config": {}})
    result = cli("experiment", "create", "--template", "base", str(partial), str(tmp_path / "model"))
    assert result.exit_code == 0, result.output
    body = master.calls("POST", "/api/v1/experiments")[0].json
    assert body["template"] == "base" and body["config"] == "entrypoint: python3 train.py\n"
    partial.write_text("[not, a, mapping]\n")
    refused = cli("experiment", "create", "--template", "base", str(partial), str(tmp_path / "model"))
    assert refused.exit_code == 1 and "must be a mapping" in refused.output
    assert len(master.calls("POST", "/api/v1/experiments")) == 1
