"""Determined's task info files as the agent writes them from a task's environment."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from pedl.agent.task_info import info_files, shared_fs_host_path, write_info_dir

ENV = {
    "DET_MASTER": "http://10.0.0.1:8080",
    "DET_CLUSTER_ID": "c-1",
    "DET_AGENT_ID": "a1",
    "DET_SLOT_IDS": "[0, 1]",
    "DET_TASK_ID": "3.abc",
    "DET_ALLOCATION_ID": "3.abc.2",
    "DET_SESSION_TOKEN": "tok",
    "DET_TASK_TYPE": "TRIAL",
    "DET_TRIAL_ID": "7",
    "DET_EXPERIMENT_ID": "3",
    "DET_TRIAL_SEED": "42",
    "DET_HPARAMS": '{"lr": 0.1}',
    "DET_EXPERIMENT_CONFIG": json.dumps(
        {"checkpoint_storage": {"type": "shared_fs", "host_path": "/data/ck"}, "debug": True}
    ),
    "DET_STEPS_COMPLETED": "30",
    "DET_TRIAL_RUN_ID": "2",
    "DET_LATEST_CHECKPOINT": "",
}


def test_the_files_carry_what_determineds_constructors_take() -> None:
    files = info_files(ENV, ["GPU-1"])
    # the argument names of ClusterInfo, TrialInfo, ResourcesInfo and RendezvousInfo in 0.38.1
    assert set(files["cluster.json"]) == {
        "master_url",
        "cluster_id",
        "agent_id",
        "slot_ids",
        "task_id",
        "allocation_id",
        "session_token",
        "task_type",
        "master_cert_name",
        "master_cert_file",
        "latest_checkpoint",
    }
    assert set(files["trial.json"]) == {
        "trial_id",
        "experiment_id",
        "trial_seed",
        "hparams",
        "config",
        "steps_completed",
        "trial_run_id",
        "debug",
        "inter_node_network_interface",
    }
    assert files["cluster.json"]["slot_ids"] == [0, 1] and files["cluster.json"]["latest_checkpoint"] is None
    assert (files["trial.json"]["trial_id"], files["trial.json"]["hparams"], files["trial.json"]["debug"]) == (
        7,
        {"lr": 0.1},
        True,
    )
    assert files["trial.json"]["steps_completed"] == 30 and files["trial.json"]["trial_run_id"] == 2
    assert files["resources.json"] == {"gpu_uuids": ["GPU-1"]}
    # one node: itself, with its slots
    assert files["rendezvous.json"] == {
        "container_addrs": ["127.0.0.1"],
        "container_rank": 0,
        "container_slot_counts": [2],
    }


def test_a_node_of_a_distributed_trial_knows_every_node_in_rank_order() -> None:
    env = {
        **ENV,
        "PEDL_NODE_ADDRS": '["10.0.0.5", "10.0.0.6"]',
        "NODE_RANK": "1",
        "PEDL_NODE_SLOTS": "[2, 2]",
        "MASTER_ADDR": "10.0.0.5",
    }
    assert info_files(env, [])["rendezvous.json"] == {
        "container_addrs": ["10.0.0.5", "10.0.0.6"],
        "container_rank": 1,
        "container_slot_counts": [2, 2],
    }


def test_only_trials_get_trial_json() -> None:
    assert "trial.json" not in info_files({**ENV, "DET_TASK_TYPE": "COMMAND"}, [])


def test_shared_fs_maps_to_the_storage_host_path_and_s3_to_nothing() -> None:
    assert shared_fs_host_path(ENV) == Path("/data/ck")
    s3 = {**ENV, "DET_EXPERIMENT_CONFIG": json.dumps({"checkpoint_storage": {"type": "s3", "bucket": "b"}})}
    assert shared_fs_host_path(s3) is None
    assert shared_fs_host_path({**ENV, "DET_EXPERIMENT_CONFIG": "not json"}) is None


def test_the_directory_is_the_tasks_alone_and_starts_fresh(tmp_path: Path) -> None:
    d = tmp_path / "info"
    d.mkdir()
    (d / "stale.json").write_text("{}")
    write_info_dir(d, info_files(ENV, []))
    assert sorted(p.name for p in d.iterdir()) == ["cluster.json", "rendezvous.json", "resources.json", "trial.json"]
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    assert stat.S_IMODE((d / "cluster.json").stat().st_mode) == 0o600  # it holds the session token
    assert json.loads((d / "cluster.json").read_text())["session_token"] == "tok"


def test_determined_gets_its_own_storage_keys_and_the_region_as_a_variable() -> None:
    from pedl.agent.task_info import storage_variables

    storage = {
        "type": "s3",
        "bucket": "b",
        "prefix": "p",
        "endpoint_url": None,
        "region": "eu-west-1",
        "save_trial_latest": 1,
    }
    env = {**ENV, "DET_EXPERIMENT_CONFIG": json.dumps({"checkpoint_storage": storage})}
    # Determined builds S3StorageManager(**section): no region
    assert info_files(env, [])["trial.json"]["config"]["checkpoint_storage"] == {
        "type": "s3",
        "bucket": "b",
        "prefix": "p",
        "endpoint_url": None,
        "save_trial_latest": 1,
    }
    assert storage_variables(env) == {"AWS_DEFAULT_REGION": "eu-west-1"}
    assert storage_variables({**env, "AWS_REGION": "us-east-2"}) == {}  # the task's own choice stands
    assert storage_variables(ENV) == {}  # shared_fs
