"""pedl.core.cluster_info: ClusterInfo from the DET_* variables, None off-cluster."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import pedl
from pedl.core.cluster_info import get_cluster_info

from .fake_master import TOKEN, task_env


def test_off_cluster_is_none() -> None:
    assert get_cluster_info({}) is None
    assert get_cluster_info({"DET_MASTER": "http://m:8080"}) is None
    assert get_cluster_info({"DET_ALLOCATION_ID": "a"}) is None


def test_reads_every_variable(tmp_path: Path) -> None:
    env = task_env(
        "http://127.0.0.1:8080/",
        tmp_path,
        latest_checkpoint="ckpt-uuid",
        hparams={"learning_rate": 0.1, "layers": {"n": 2}},
    )
    info = get_cluster_info(env)
    assert info is not None
    assert info.master_url == "http://127.0.0.1:8080"
    assert (info.cluster_id, info.agent_id, info.task_id, info.allocation_id) == (
        "cluster-1",
        "agent-1",
        "3.1",
        "3.1.0",
    )
    assert info.session_token == TOKEN
    assert info.task_type == "TRIAL"
    assert info.latest_checkpoint == "ckpt-uuid"
    assert info.slot_ids == [0]
    assert info.user == "determined"
    assert info.resources_id == "res-1"
    trial = info.trial
    assert trial is not None
    assert (trial.trial_id, trial.experiment_id, trial.trial_seed) == (3, 2, 42)
    assert (trial.steps_completed, trial.trial_run_id) == (0, 1)
    assert trial.hparams == {"learning_rate": 0.1, "layers": {"n": 2}}
    assert trial.config["searcher"]["metric"] == "validation_loss"


def test_empty_latest_checkpoint_is_none(tmp_path: Path) -> None:
    info = get_cluster_info(task_env("http://m:8080", tmp_path, latest_checkpoint=""))
    assert info is not None and info.latest_checkpoint is None


def test_master_url_without_scheme_gets_http(tmp_path: Path) -> None:
    info = get_cluster_info(task_env("master.example:8080", tmp_path))
    assert info is not None and info.master_url == "http://master.example:8080"


def test_session_token_is_kept_out_of_repr(tmp_path: Path) -> None:
    info = get_cluster_info(task_env("http://m:8080", tmp_path))
    assert TOKEN not in repr(info)


def test_task_without_trial_has_no_trial_info(tmp_path: Path) -> None:
    env = {k: v for k, v in task_env("http://m:8080", tmp_path).items() if k != "DET_TRIAL_ID"}
    env["DET_TASK_TYPE"] = "COMMAND"
    info = get_cluster_info(env)
    assert info is not None and info.trial is None and info.task_type == "COMMAND"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("DET_HPARAMS", "{not json", "DET_HPARAMS is not valid JSON"),
        ("DET_HPARAMS", "[1, 2]", "DET_HPARAMS must be a JSON dict"),
        ("DET_TRIAL_ID", "three", "DET_TRIAL_ID must be an integer"),
    ],
)
def test_bad_variables_are_named(tmp_path: Path, name: str, value: str, message: str) -> None:
    env = task_env("http://m:8080", tmp_path)
    env[name] = value
    with pytest.raises(ValueError, match=message):
        get_cluster_info(env)


def test_pedl_get_cluster_info_reads_the_process_environment(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, off_cluster: None
) -> None:
    assert pedl.get_cluster_info() is None
    for name, value in task_env("http://m:8080", tmp_path).items():
        monkeypatch.setenv(name, value)
    info = pedl.get_cluster_info()
    assert info is not None and info.trial is not None
    assert info.trial.hparams == json.loads(task_env("http://m:8080", tmp_path)["DET_HPARAMS"])


def test_the_master_ca_comes_from_pedl_then_determined_variables(tmp_path: Path) -> None:
    env = task_env("https://m:8443", tmp_path)
    info = get_cluster_info(env)
    assert info is not None and info.master_cert_file is None
    info = get_cluster_info({**env, "DET_MASTER_CERT_FILE": "/det/ca.pem"})
    assert info is not None and info.master_cert_file == "/det/ca.pem"
    info = get_cluster_info({**env, "DET_MASTER_CERT_FILE": "/det/ca.pem", "PEDL_MASTER_CERT": "/pedl/ca.pem"})
    assert info is not None and info.master_cert_file == "/pedl/ca.pem"
