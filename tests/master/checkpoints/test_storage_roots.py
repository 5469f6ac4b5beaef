"""Storage roots: parsing master.yaml's roots, the pure comparisons, the checks of an experiment's
storage and of one checkpoint on resolved paths, and experiment create refusing a storage outside
the roots."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from pedl.config.checkpoint_storage import StorageRoot, parse_storage_root
from pedl.config.master_config import MasterConfig
from pedl.config.security_config import SecurityConfig
from pedl.errors import InvalidArgument
from pedl.master.checkpoints.storage_roots import (
    StorageRoots,
    allowed_roots,
    check_experiment_storage,
    checkpoint_problem,
    dir_inside,
    is_path_component,
    location_problem,
    prefix_inside,
    storage_problem,
)
from tests.master.fakes import SINGLE_CONFIG, post

UUID = "0b542e90-dd3e-4523-8ea6-c5f48e47a2b0"

# -- parsing and comparing (pure) -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "root"),
    [
        ("/mnt/ckpts", StorageRoot("shared_fs", path="/mnt/ckpts")),
        ("/mnt/ckpts/", StorageRoot("shared_fs", path="/mnt/ckpts")),
        ("s3://my-bucket", StorageRoot("s3", bucket="my-bucket")),
        ("s3://my-bucket/", StorageRoot("s3", bucket="my-bucket")),
        ("s3://my-bucket//team/a/", StorageRoot("s3", bucket="my-bucket", prefix="team/a")),
    ],
)
def test_roots_parse(text: str, root: StorageRoot) -> None:
    assert parse_storage_root(text) == root


@pytest.mark.parametrize("text", ["relative/dir", "", "s3://", "s3://UPPER", "s3://b/../x", "gs://bucket", "/a\x00b"])
def test_bad_roots_are_refused_in_master_yaml(text: str) -> None:
    with pytest.raises(ValueError):
        parse_storage_root(text)
    with pytest.raises(ValidationError, match="checkpoint_storage_roots"):
        SecurityConfig(checkpoint_storage_roots=[text])


@pytest.mark.parametrize(
    ("path", "root", "inside"),
    [
        ("/a/b", "/a/b", True),
        ("/a/b/c", "/a/b", True),
        ("/a/bc", "/a/b", False),
        ("/a", "/a/b", False),
        ("/anything", "/", True),
    ],
)
def test_dir_inside(path: str, root: str, inside: bool) -> None:
    assert dir_inside(path, root) is inside


@pytest.mark.parametrize(
    ("prefix", "root", "inside"),
    [
        ("a/b", "a/b", True),
        ("a/b/c", "a/b", True),
        ("a/bc", "a/b", False),
        ("a", "a/b", False),
        ("x", "", True),
        ("", "", True),
        ("/a//b/", "a/b", True),
    ],
)
def test_prefix_inside(prefix: str, root: str, inside: bool) -> None:
    assert prefix_inside(prefix, root) is inside


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        (UUID, True),
        ("ck-1", True),
        ("", False),
        (".", False),
        ("..", False),
        ("a/b", False),
        ("a\\b", False),
        ("a\x00", False),
    ],
)
def test_is_path_component(name: str, ok: bool) -> None:
    assert is_path_component(name) is ok


# -- the checks -----------------------------------------------------------------------------------


@pytest.fixture
def roots(tmp_path: Path) -> StorageRoots:
    (tmp_path / "root").mkdir()
    return StorageRoots.of(
        {"type": "shared_fs", "host_path": str(tmp_path / "root")},
        [str(tmp_path / "extra"), "s3://bucket-a", "s3://bucket-b/team/a"],
    )


def test_roots_are_the_masters_storage_and_the_extra_ones(tmp_path: Path, roots: StorageRoots) -> None:
    assert roots.dirs == (str(tmp_path / "root"), str(tmp_path / "extra"))
    assert [str(r) for r in roots.s3] == ["s3://bucket-a", "s3://bucket-b/team/a"]
    s3_master = StorageRoots.of({"type": "s3", "bucket": "main", "prefix": "/ckpts/"})
    assert s3_master.dirs == () and [str(r) for r in s3_master.s3] == ["s3://main/ckpts"]


def test_allowed_roots_of_a_master_config(tmp_path: Path) -> None:
    config = MasterConfig(data_dir=tmp_path / "m", security=SecurityConfig(checkpoint_storage_roots=["s3://b-1"]))
    roots = allowed_roots(config)
    assert roots.dirs == (str(tmp_path / "m" / "checkpoints"),) and [str(r) for r in roots.s3] == ["s3://b-1"]


@pytest.mark.parametrize(
    ("storage", "field"),
    [
        ({"type": "shared_fs", "host_path": "{root}"}, None),
        ({"host_path": "{root}", "storage_path": "team/a"}, None),
        ({"type": "shared_fs", "host_path": "{tmp}/extra/deeper"}, None),
        ({"type": "shared_fs", "host_path": "{tmp}"}, "checkpoint_storage.host_path"),
        ({"type": "shared_fs", "host_path": "/etc"}, "checkpoint_storage.host_path"),
        ({"type": "shared_fs", "host_path": "{root}/../elsewhere"}, "checkpoint_storage.host_path"),
        (
            {"type": "shared_fs", "host_path": "{root}", "storage_path": "{tmp}/elsewhere"},
            "checkpoint_storage.host_path",
        ),
        ({"type": "shared_fs", "host_path": "relative"}, "checkpoint_storage.host_path"),
        ({"type": "shared_fs"}, "checkpoint_storage.host_path"),
        ({"type": "s3", "bucket": "bucket-a", "prefix": "anything"}, None),
        ({"type": "s3", "bucket": "bucket-b", "prefix": "team/a/x"}, None),
        ({"type": "s3", "bucket": "bucket-b", "prefix": "team/ab"}, "checkpoint_storage.prefix"),
        ({"type": "s3", "bucket": "bucket-b"}, "checkpoint_storage.prefix"),
        ({"type": "s3", "bucket": "bucket-c"}, "checkpoint_storage.bucket"),
        ({"type": "gcs", "bucket": "x"}, "checkpoint_storage.type"),
        # directory storage is judged where the master reaches it: host_path, else the path itself
        ({"type": "directory", "container_path": "/ckpt", "host_path": "{root}/team"}, None),
        ({"type": "directory", "container_path": "{root}/team"}, None),
        ({"type": "directory", "container_path": "/ckpt", "host_path": "/etc"}, "checkpoint_storage.container_path"),
        ({"type": "directory", "container_path": "{tmp}"}, "checkpoint_storage.container_path"),
    ],
)
def test_storage_problem_names_the_field(tmp_path: Path, roots: StorageRoots, storage: dict, field: str | None) -> None:
    storage = {k: v.format(tmp=tmp_path, root=tmp_path / "root") for k, v in storage.items()}
    problem = storage_problem(storage, roots)
    assert (problem[0] if problem else None) == field
    if field is None:
        check_experiment_storage(storage, roots)
    else:
        with pytest.raises(InvalidArgument, match=field) as raised:
            check_experiment_storage(storage, roots)
        assert raised.value.fields[0]["field"] == field


def test_a_symlink_does_not_carry_a_storage_out_of_a_root(tmp_path: Path, roots: StorageRoots) -> None:
    (tmp_path / "root" / "escape").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    problem = storage_problem({"host_path": str(tmp_path / "root" / "escape")}, roots)
    assert problem is not None and str(tmp_path / "elsewhere") in problem[1]


def test_checkpoint_problem_on_resolved_paths(tmp_path: Path, roots: StorageRoots) -> None:
    storage = {"type": "shared_fs", "host_path": str(tmp_path / "root")}
    assert checkpoint_problem(storage, UUID, roots) is None  # not written yet: nothing to refuse
    (tmp_path / "root" / UUID).mkdir()
    assert checkpoint_problem(storage, UUID, roots) is None
    (tmp_path / "root" / "linked").symlink_to(tmp_path / "root" / UUID, target_is_directory=True)
    assert "symbolic link" in checkpoint_problem(storage, "linked", roots)
    for bad in ("..", ".", "a\\b", ""):
        assert "not a single path component" in checkpoint_problem(storage, bad, roots)
    outside = {"type": "shared_fs", "host_path": str(tmp_path / "some" / "dir")}
    assert "checkpoint_storage.host_path" in checkpoint_problem(outside, UUID, roots)
    assert "recorded storage" in checkpoint_problem(storage, UUID, roots, recorded=outside)
    assert location_problem(storage, UUID, roots, recorded=storage) is None
    s3 = {"type": "s3", "bucket": "bucket-a", "prefix": "p"}
    assert checkpoint_problem(s3, UUID, roots) is None


# -- experiment create ----------------------------------------------------------------------------


@pytest.fixture
def master_config(master_config: MasterConfig, tmp_path: Path) -> MasterConfig:
    security = master_config.security.model_copy(
        update={"checkpoint_storage_roots": [str(tmp_path / "extra"), "s3://allowed-bucket/team"]}
    )
    return master_config.model_copy(update={"security": security})


def create(client: TestClient, user: dict, storage: str):
    body = {"activate": False, "config": SINGLE_CONFIG + f"checkpoint_storage: {storage}\n", "modelDefinition": []}
    return post(client, "/api/v1/experiments", body, user)


@pytest.mark.parametrize(
    ("storage", "field"),
    [
        ("{{type: shared_fs, host_path: /some/dir}}", "checkpoint_storage.host_path"),
        ("{{type: shared_fs, host_path: '{tmp}'}}", "checkpoint_storage.host_path"),
        ("{{type: shared_fs, host_path: '{tmp}/extra', storage_path: ../../..}}", "checkpoint_storage"),
        ("{{type: s3, bucket: other-bucket}}", "checkpoint_storage.bucket"),
        ("{{type: s3, bucket: allowed-bucket, prefix: elsewhere}}", "checkpoint_storage.prefix"),
        ("{{type: directory, container_path: /var/ckpt}}", "checkpoint_storage.container_path"),
        ("{{type: directory, container_path: relative}}", "checkpoint_storage.container_path"),
    ],
)
def test_create_refuses_a_storage_outside_the_roots(
    client: TestClient, user: dict, tmp_path: Path, storage: str, field: str
) -> None:
    r = create(client, user, storage.format(tmp=tmp_path))
    assert r.status_code == 400, r.text
    assert field in r.json()["message"]
    assert client.get("/api/v1/experiments", headers=user).json()["experiments"] == []


@pytest.mark.parametrize(
    "storage",
    [
        "{{save_trial_best: 2}}",  # the master's own storage
        "{{type: shared_fs, host_path: '{tmp}/extra/mine'}}",
        "{{type: s3, bucket: allowed-bucket, prefix: team/mine}}",
        "{{type: directory, container_path: '{tmp}/extra/dir'}}",
    ],
)
def test_create_accepts_a_storage_inside_the_roots(
    client: TestClient, user: dict, tmp_path: Path, storage: str
) -> None:
    r = create(client, user, storage.format(tmp=tmp_path))
    assert r.status_code == 200, r.text


def test_an_s3_endpoint_the_master_was_not_given_is_refused() -> None:
    roots = StorageRoots.of(
        {"type": "shared_fs", "host_path": "/srv/ckpt"}, ["s3://bucket"], ["http://minio.internal:9000"]
    )
    inside = {"type": "s3", "bucket": "bucket", "prefix": "p"}
    assert storage_problem(inside, roots) is None  # AWS itself
    assert storage_problem({**inside, "endpoint_url": "http://minio.internal:9000"}, roots) is None
    field, why = storage_problem({**inside, "endpoint_url": "http://169.254.169.254"}, roots)
    assert field == "checkpoint_storage.endpoint_url" and "169.254.169.254" in why


def test_directory_storage_is_found_on_the_host_through_the_bind_mounts(
    client: TestClient, user: dict, tmp_path: Path
) -> None:
    """A task in a container writes directory storage into the bind mount that covers it: the master keeps
    that host directory (and judges it by the roots); with no covering mount the files would go with the
    container, which create refuses naming the field."""
    extra = tmp_path / "extra"
    mounts = f"bind_mounts: [{{host_path: '{extra}', container_path: /data}}]\n"
    body = {
        "activate": False,
        "modelDefinition": [],
        "config": SINGLE_CONFIG + mounts + "environment: {image: 'pedl/x:1'}\n"
        "checkpoint_storage: {type: directory, container_path: /data/ckpt}\n",
    }
    r = post(client, "/api/v1/experiments", body, user)
    assert r.status_code == 200, r.text
    storage = r.json()["experiment"]["config"]["checkpoint_storage"]
    assert storage == {**storage, "type": "directory", "container_path": "/data/ckpt", "host_path": str(extra / "ckpt")}
    body["config"] = body["config"].replace("/data/ckpt", "/elsewhere/ckpt")
    r = post(client, "/api/v1/experiments", body, user)
    assert r.status_code == 400, r.text
    assert "checkpoint_storage.container_path" in r.json()["message"] and "bind mount" in r.json()["message"]
