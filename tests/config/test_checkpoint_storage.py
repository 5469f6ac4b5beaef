"""checkpoint_storage in master.yaml and experiment configs: shared_fs or s3 (a union on `type`,
shared_fs when it is left out), errors that name the field, and how an experiment's section is
merged with the master's."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pedl.config.checkpoint_storage import (
    as_determined,
    directory_host_path,
    experiment_storage,
    master_view,
    merge_storage,
)
from pedl.config.experiment_config import (
    ExperimentConfig,
    S3StorageConfig,
    SharedFSStorageConfig,
    parse_experiment_config,
)
from pedl.config.loading import ConfigError
from pedl.config.master_config import S3Storage, SharedFSStorage, load_master_config
from pedl.errors import InvalidArgument

EXP = "entrypoint: python train.py\nsearcher: {name: single, metric: loss}\n"


def master(tmp_path: Path, text: str):
    path = tmp_path / "master.yaml"
    path.write_text(textwrap.dedent(text))
    return load_master_config(path)


def master_problems(tmp_path: Path, text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        master(tmp_path, text)
    return {p["field"]: p["message"] for p in info.value.fields}


def exp_problems(text: str) -> dict[str, str]:
    with pytest.raises(ConfigError) as info:
        parse_experiment_config(EXP + textwrap.dedent(text))
    return {p["field"]: p["message"] for p in info.value.fields}


def test_master_s3_storage(tmp_path: Path) -> None:
    cfg = master(
        tmp_path,
        """
        checkpoint_storage:
          type: s3
          bucket: team-ckpts
          prefix: /pedl/prod/
          endpoint_url: http://minio.local:9000
          region: eu-west-1
          save_experiment_best: 2
    """,
    )
    storage = cfg.effective_checkpoint_storage()
    assert isinstance(storage, S3Storage)
    assert (storage.bucket, storage.prefix, storage.endpoint_url, storage.region) == (
        "team-ckpts",
        "pedl/prod",
        "http://minio.local:9000",
        "eu-west-1",
    )
    assert (storage.save_experiment_best, storage.save_trial_best, storage.save_trial_latest) == (2, 1, 1)


def test_master_shared_fs_without_type(tmp_path: Path) -> None:
    storage = master(tmp_path, "checkpoint_storage: {host_path: /mnt/c}\n").effective_checkpoint_storage()
    assert isinstance(storage, SharedFSStorage) and storage.host_path == "/mnt/c"


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("checkpoint_storage: {type: s3}\n", "checkpoint_storage.bucket", "Field required"),
        (
            "checkpoint_storage: {type: s3, bucket: Bad_Name}\n",
            "checkpoint_storage.bucket",
            "not a valid S3 bucket name",
        ),
        (
            "checkpoint_storage: {type: s3, bucket: ok-name, endpoint_url: minio:9000}\n",
            "checkpoint_storage.endpoint_url",
            "http:// or https://",
        ),
        ("checkpoint_storage: {type: s3, bucket: ok-name, prefix: a/../b}\n", "checkpoint_storage.prefix", "'..'"),
        (
            "checkpoint_storage: {type: s3, bucket: ok-name, host_path: /x}\n",
            "checkpoint_storage.host_path",
            "unknown key",
        ),
        (
            "checkpoint_storage: {type: s3, bucket: ok-name, access_key: AKIA}\n",
            "checkpoint_storage.access_key",
            "unknown key",
        ),
        (
            "checkpoint_storage: {type: s3, bucket: ok-name, save_trial_best: -1}\n",
            "checkpoint_storage.save_trial_best",
            "greater than or equal to 0",
        ),
        ("checkpoint_storage: {type: gcs, bucket: b}\n", "checkpoint_storage", "type must be one of: shared_fs, s3"),
    ],
)
def test_master_errors_name_the_field(tmp_path: Path, text: str, field: str, message: str) -> None:
    problems = master_problems(tmp_path, text)
    assert field in problems, problems
    assert message in problems[field]


def test_experiment_s3_section() -> None:
    cfg = parse_experiment_config(EXP + "checkpoint_storage: {type: s3, bucket: exp-bucket, save_trial_latest: 2}\n")
    assert isinstance(cfg.checkpoint_storage, S3StorageConfig)
    assert cfg.checkpoint_storage.bucket == "exp-bucket" and cfg.checkpoint_storage.save_trial_latest == 2
    assert cfg.checkpoint_storage.save_trial_best is None  # the master's


def test_experiment_section_without_type_is_shared_fs_or_the_masters() -> None:
    cfg = parse_experiment_config(EXP + "checkpoint_storage: {save_trial_best: 3}\n")
    assert isinstance(cfg.checkpoint_storage, SharedFSStorageConfig)
    assert cfg.checkpoint_storage.type is None


@pytest.mark.parametrize(
    ("text", "field", "message"),
    [
        ("checkpoint_storage: {type: s3, prefix: x}\n", "checkpoint_storage.bucket", "Field required"),
        (
            "checkpoint_storage: {type: s3, bucket: b, storage_path: x}\n",
            "checkpoint_storage.storage_path",
            "unknown key",
        ),
        ("checkpoint_storage: {bucket: b}\n", "checkpoint_storage.bucket", "unknown key"),
        ("checkpoint_storage: {type: floppy}\n", "checkpoint_storage", "type must be one of"),
        ("checkpoint_storage: {type: directory}\n", "checkpoint_storage.container_path", "Field required"),
        (
            "checkpoint_storage: {type: directory, container_path: rel}\n",
            "checkpoint_storage.container_path",
            "absolute path",
        ),
        (
            "checkpoint_storage: {type: directory, container_path: /c, host_path: rel}\n",
            "checkpoint_storage.host_path",
            "absolute path",
        ),
        (
            "checkpoint_storage: {type: directory, container_path: /c, bucket: b}\n",
            "checkpoint_storage.bucket",
            "unknown key",
        ),
    ],
)
def test_experiment_errors_name_the_field(text: str, field: str, message: str) -> None:
    problems = exp_problems(text)
    assert field in problems, problems
    assert message in problems[field]


SHARED = {
    "type": "shared_fs",
    "host_path": "/mnt/c",
    "storage_path": None,
    "save_experiment_best": 0,
    "save_trial_best": 1,
    "save_trial_latest": 1,
}
S3 = {
    "type": "s3",
    "bucket": "m-bucket",
    "prefix": "m",
    "endpoint_url": None,
    "region": None,
    "save_experiment_best": 0,
    "save_trial_best": 2,
    "save_trial_latest": 1,
}


def dump(text: str) -> dict | None:
    cfg = parse_experiment_config(EXP + text)
    return cfg.checkpoint_storage.model_dump(mode="json") if cfg.checkpoint_storage else None


def test_merge_keeps_the_masters_section_when_the_experiment_has_none() -> None:
    assert merge_storage(S3, None) == S3


def test_merge_same_type_overrides_field_by_field() -> None:
    assert merge_storage(SHARED, dump("checkpoint_storage: {storage_path: exp1, save_trial_best: 0}\n")) == {
        **SHARED,
        "storage_path": "exp1",
        "save_trial_best": 0,
    }
    # bucket and prefix are the experiment's own location; endpoint and region stay the master's
    s3 = {**S3, "endpoint_url": "http://minio:9000", "region": "eu-west-1"}
    assert merge_storage(s3, dump("checkpoint_storage: {type: s3, bucket: e-bucket}\n")) == {
        **s3,
        "bucket": "e-bucket",
        "prefix": "",
    }


def test_merge_without_type_takes_the_masters_type() -> None:
    assert merge_storage(S3, dump("checkpoint_storage: {save_experiment_best: 3}\n")) == {
        **S3,
        "save_experiment_best": 3,
    }


def test_merge_of_another_type_replaces_the_location_and_keeps_the_masters_policy() -> None:
    out = merge_storage(SHARED, dump("checkpoint_storage: {type: s3, bucket: e-bucket, prefix: p}\n"))
    assert out == {
        "type": "s3",
        "bucket": "e-bucket",
        "prefix": "p",
        "save_experiment_best": 0,
        "save_trial_best": 1,
        "save_trial_latest": 1,
    }
    # the result is a valid experiment section again (trials validate the stored config)
    ExperimentConfig.model_validate(
        {"entrypoint": "x", "searcher": {"name": "single", "metric": "m"}, "checkpoint_storage": out}
    )
    out = merge_storage(S3, dump("checkpoint_storage: {host_path: /mnt/x}\n"))
    assert out == {
        "type": "shared_fs",
        "host_path": "/mnt/x",
        "save_experiment_best": 0,
        "save_trial_best": 2,
        "save_trial_latest": 1,
    }


def test_merge_to_shared_fs_needs_a_host_path() -> None:
    with pytest.raises(
        InvalidArgument, match="checkpoint_storage.host_path: required, because the master's storage is s3"
    ):
        merge_storage(S3, dump("checkpoint_storage: {type: shared_fs}\n"))


def test_the_master_has_no_directory_storage_of_its_own(tmp_path: Path) -> None:
    problems = master_problems(tmp_path, "checkpoint_storage: {type: directory, container_path: /c}\n")
    assert "type must be one of: shared_fs, s3" in problems["checkpoint_storage"]


def test_merge_to_directory_keeps_the_masters_policy() -> None:
    out = merge_storage(SHARED, dump("checkpoint_storage: {type: directory, container_path: /ckpt}\n"))
    assert out == {
        "type": "directory",
        "container_path": "/ckpt",
        "save_experiment_best": 0,
        "save_trial_best": 1,
        "save_trial_latest": 1,
    }


@pytest.mark.parametrize(
    ("container", "host"),
    [
        (None, "/data/ckpt"),  # a process task sees the host's files
        ({"bind_mounts": [{"host_path": "/mnt/shared", "container_path": "/data"}]}, "/mnt/shared/ckpt"),
        (
            {
                "bind_mounts": [
                    {"host_path": "/mnt/a", "container_path": "/"},
                    {"host_path": "/mnt/b", "container_path": "/data/ckpt"},
                ]
            },
            "/mnt/b",
        ),  # the innermost
        ({"bind_mounts": [{"host_path": "/mnt/a", "container_path": "/dat"}]}, None),  # not a path prefix
        ({"bind_mounts": []}, None),
    ],
)
def test_directory_host_path(container: dict | None, host: str | None) -> None:
    assert directory_host_path("/data/ckpt", container) == host


def test_the_master_reaches_directory_storage_as_shared_fs() -> None:
    section = {"type": "directory", "container_path": "/data", "host_path": "/mnt/x", "save_trial_best": 2}
    assert master_view(section) == {
        "type": "shared_fs",
        "host_path": "/mnt/x",
        "storage_path": None,
        "save_trial_best": 2,
    }
    assert master_view(SHARED) is SHARED
    assert experiment_storage({"checkpoint_storage": section})["host_path"] == "/mnt/x"
    assert experiment_storage({}, SHARED) == SHARED
    # Determined's DirectoryStorageManager takes container_path only
    shown = as_determined({"checkpoint_storage": section})["checkpoint_storage"]
    assert shown == {"type": "directory", "container_path": "/data", "save_trial_best": 2}


@pytest.mark.parametrize("host_path", ["checkpoints", "./checkpoints", "../elsewhere", "~/checkpoints"])
def test_a_relative_host_path_is_refused_naming_the_field(tmp_path: Path, monkeypatch, host_path: str) -> None:
    """Judged against the working directory of whichever process read it, a relative host_path named a
    different directory on the master and on each agent. It is refused in an experiment's config (and so
    in what a TensorBoard inherits) and in a workspace's storage; master.yaml's own at start
    (tests/cli/test_master_check_config.py)."""
    from pedl.config.master_config import MasterConfig
    from pedl.master.workspaces.workspace_storage import checked_storage

    monkeypatch.chdir(tmp_path)  # where a relative path would have landed: the master's own storage root
    problems = exp_problems(f"checkpoint_storage: {{host_path: {host_path}}}\n")
    assert "must be an absolute path" in problems["checkpoint_storage.host_path"], problems
    with pytest.raises(InvalidArgument, match=r"checkpointStorageConfig\.host_path: .*must be an absolute path"):
        checked_storage(MasterConfig(data_dir=tmp_path), {"type": "shared_fs", "host_path": host_path})
