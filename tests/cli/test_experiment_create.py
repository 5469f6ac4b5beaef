"""`pedl experiment create`: local validation, the det-shaped body, follow mode."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from tests.cli.fake_master import NDJSON, FakeMaster, experiment, log, page, trial

CONFIG = """\
name: mnist  # comments survive: the raw text is sent
entrypoint: python3 train.py
searcher:
  name: single
  metric: loss
  max_length: 10
hyperparameters:
  lr: 0.1
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    d = tmp_path / "model"
    (d / "pkg").mkdir(parents=True)
    (d / "train.py").write_text("print('train')\n")
    (d / "pkg" / "net.py").write_text("NET = 1\n")
    (d / "secret.key").write_text("k")
    (d / ".pedlignore").write_text("*.key\n")
    return d


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(CONFIG)
    return path


def created(exp_id: int = 12) -> dict:
    return {"experiment": experiment(exp_id), "config": {}}


def test_create_sends_det_shaped_body(cli, master: FakeMaster, config_file: Path, model_dir: Path) -> None:
    master.route("POST", "/api/v1/experiments", created(12))
    result = cli("experiment", "create", str(config_file), str(model_dir))
    assert result.exit_code == 0, result.output
    assert "Created experiment 12" in result.stdout
    (req,) = master.calls("POST", "/api/v1/experiments")
    body = req.json
    assert list(body) == ["activate", "config", "modelDefinition", "parentId", "projectId", "template", "validateOnly"]
    assert body["activate"] is True and body["config"] == CONFIG
    assert body["parentId"] is None and body["projectId"] is None and body["validateOnly"] is False
    files = {f["path"]: f for f in body["modelDefinition"]}
    assert sorted(files) == ["pkg", "pkg/net.py", "train.py"]
    assert files["pkg"]["type"] == 53 and files["train.py"]["type"] == 48
    assert base64.b64decode(files["train.py"]["content"]) == b"print('train')\n"
    assert isinstance(files["train.py"]["mtime"], str)
    assert req.headers["content-length"] == str(len(req.body))


def test_create_paused_does_not_activate(cli, master: FakeMaster, config_file: Path, model_dir: Path) -> None:
    master.route("POST", "/api/v1/experiments", created())
    result = cli("experiment", "create", "--paused", str(config_file), str(model_dir))
    assert result.exit_code == 0, result.output
    assert master.calls("POST", "/api/v1/experiments")[0].json["activate"] is False


def test_invalid_config_lists_every_problem_and_uploads_nothing(
    cli, master: FakeMaster, tmp_path: Path, model_dir: Path
) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("entrypoint: ''\nsearcher:\n  name: bayes\n  metric: loss\nmax_restarts: -1\nbogus: 1\n")
    result = cli("experiment", "create", str(bad), str(model_dir))
    assert result.exit_code == 1
    out = result.output
    assert f"invalid experiment config {bad}" in out
    for field in ("entrypoint", "searcher.name", "max_restarts", "bogus: unknown key"):
        assert field in out, (field, out)
    assert master.requests == []


def test_malformed_yaml_is_reported_with_its_line(cli, master: FakeMaster, tmp_path: Path, model_dir: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1, 2\n")
    result = cli("experiment", "create", str(bad), str(model_dir))
    assert result.exit_code == 1
    assert "malformed YAML" in result.output and "line" in result.output
    assert master.requests == []


def test_missing_model_dir_names_it(cli, master: FakeMaster, config_file: Path, tmp_path: Path) -> None:
    result = cli("experiment", "create", str(config_file), str(tmp_path / "missing"))
    assert result.exit_code == 1
    assert "missing" in result.output and "does not exist" in result.output
    assert master.requests == []


def test_missing_config_file_names_it(cli, master: FakeMaster, tmp_path: Path, model_dir: Path) -> None:
    result = cli("experiment", "create", str(tmp_path / "nope.yaml"), str(model_dir))
    assert result.exit_code == 1
    assert "nope.yaml" in result.output


def test_size_limit_is_checked_before_upload(
    cli, master: FakeMaster, config_file: Path, model_dir: Path, monkeypatch
) -> None:
    monkeypatch.setenv("PEDL_MAX_MODEL_DEF_BYTES", "10")
    result = cli("experiment", "create", str(config_file), str(model_dir))
    assert result.exit_code == 1
    assert "over the limit" in result.output and "10 bytes" in result.output
    assert master.requests == []


def test_follow_streams_every_trial_and_exits_0_on_completed(
    cli, master: FakeMaster, config_file: Path, model_dir: Path
) -> None:
    master.route("POST", "/api/v1/experiments", created(3))
    master.sequence(
        "GET",
        "/api/v1/experiments/3",
        [{"experiment": experiment(3, "STATE_ACTIVE")}, {"experiment": experiment(3, "STATE_COMPLETED")}],
    )
    master.sequence(
        "GET",
        "/api/v1/experiments/3/trials",
        [
            page("trials", [trial(5, 3, "STATE_RUNNING"), trial(6, 3, "STATE_RUNNING")]),
            page("trials", [trial(5, 3, "STATE_COMPLETED"), trial(6, 3, "STATE_COMPLETED")]),
        ],
    )
    master.route("GET", "/api/v1/trials/5/logs", NDJSON([log(1, "five says hi", 5)]))
    master.route("GET", "/api/v1/trials/6/logs", NDJSON([log(2, "six says hi", 6), log(3, "six: done", 6)]))
    result = cli("experiment", "create", "-f", str(config_file), str(model_dir))
    assert result.exit_code == 0, result.output
    out = result.stdout
    for line in (
        "Created experiment 3",
        "Experiment 3 is ACTIVE",
        "Experiment 3 is COMPLETED",
        "[trial 5] five says hi",
        "[trial 6] six says hi",
        "[trial 6] six: done",
        "[trial 5] is RUNNING",
        "[trial 6] is COMPLETED",
    ):
        assert line in out, (line, out)
    assert master.calls("GET", "/api/v1/trials/5/logs")[0].q("follow") == "true"


def test_follow_exits_1_when_the_experiment_errors(cli, master: FakeMaster, config_file: Path, model_dir: Path) -> None:
    master.route("POST", "/api/v1/experiments", created(4))
    master.route("GET", "/api/v1/experiments/4", {"experiment": experiment(4, "STATE_ERROR")})
    master.route("GET", "/api/v1/experiments/4/trials", page("trials", []))
    result = cli("experiment", "create", "--follow", str(config_file), str(model_dir))
    assert result.exit_code == 1
    assert "Experiment 4 is ERROR" in result.stdout
