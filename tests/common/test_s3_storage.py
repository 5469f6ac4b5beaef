"""S3Storage against moto's S3 server over HTTP: key layout, round trips, listing, deletion, and
boto3 failures turned into pedl errors that name the bucket and key."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError

import pedl.core
from pedl.common.checkpoint_storage import (
    CheckpointNotFound,
    S3Storage,
    SharedFSStorage,
    storage_from_config,
)
from pedl.common.s3_errors import s3_error
from pedl.errors import Forbidden, NotFound, PedlError, Unavailable
from tests.support.moto_server import (  # noqa: F401
    REGION,
    moto_endpoint_fixture,
    moto_server_fixture,
)

UUID = "0b542e90-dd3e-4523-8ea6-c5f48e47a2b0"
BUCKET = "pedl-ckpts"


@pytest.fixture
def s3(moto_endpoint: str) -> object:
    client = boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION)
    client.create_bucket(Bucket=BUCKET)
    return client


@pytest.fixture
def storage(moto_endpoint: str, s3: object) -> S3Storage:
    return S3Storage(BUCKET, prefix="team/exp", endpoint_url=moto_endpoint, region=REGION)


def keys(s3, prefix: str = "") -> dict[str, int]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return {o["Key"]: o["Size"] for page in pages for o in page.get("Contents") or []}


def write_tree(path: Path) -> None:
    (path / "weights.bin").write_bytes(b"x" * 10)
    (path / "sub" / "deeper").mkdir(parents=True)
    (path / "sub" / "state.json").write_text("{}")
    (path / "empty").mkdir()


def test_store_uploads_on_exit_under_prefix_and_uuid(storage: S3Storage, s3, tmp_path: Path) -> None:
    with storage.store_path(UUID) as path:
        write_tree(path)
        assert keys(s3) == {}  # nothing is uploaded before the block ends
        written = path
    assert not written.exists()  # the temporary directory is gone
    base = f"team/exp/{UUID}/"
    assert keys(s3) == {
        base + "weights.bin": 10,
        base + "sub/": 0,
        base + "sub/state.json": 2,
        base + "sub/deeper/": 0,
        base + "empty/": 0,
    }
    # the same entries shared_fs would list for the same tree
    (tmp_path / UUID).mkdir()
    write_tree(tmp_path / UUID)
    assert storage.resources(UUID) == SharedFSStorage(tmp_path).resources(UUID)


def test_links_are_not_uploaded(storage: S3Storage, s3, tmp_path: Path) -> None:
    """Symlinks are not part of a checkpoint: a dangling one does not fail the upload, and one that
    points out of the checkpoint does not carry its target's bytes into the bucket."""
    (tmp_path / "secret.txt").write_text("TOP-SECRET")
    with storage.store_path(UUID) as path:
        (path / "weights.bin").write_bytes(b"x" * 10)
        (path / "link").symlink_to(tmp_path / "secret.txt")
        (path / "dir-link").symlink_to(tmp_path, target_is_directory=True)
        (path / "dangling").symlink_to(tmp_path / "nowhere")
    assert keys(s3) == {f"team/exp/{UUID}/weights.bin": 10}


def test_restore_brings_back_files_and_empty_directories(storage: S3Storage) -> None:
    with storage.store_path(UUID) as path:
        write_tree(path)
    with storage.restore_path(UUID) as path:
        assert (path / "weights.bin").read_bytes() == b"x" * 10
        assert (path / "sub" / "state.json").read_text() == "{}"
        assert (path / "empty").is_dir() and (path / "sub" / "deeper").is_dir()
        restored = path
    assert not restored.exists()


def test_without_prefix_keys_start_with_the_uuid(moto_endpoint: str, s3) -> None:
    storage = S3Storage(BUCKET, endpoint_url=moto_endpoint)
    with storage.store_path(UUID) as path:
        (path / "f").write_text("1")
    assert list(keys(s3)) == [f"{UUID}/f"]


def test_prefix_slashes_are_normalized(moto_endpoint: str) -> None:
    storage = S3Storage(BUCKET, prefix="/a//b/", endpoint_url=moto_endpoint)
    assert storage.key_prefix(UUID) == f"a/b/{UUID}/"
    assert storage.url(UUID, "x") == f"s3://{BUCKET}/a/b/{UUID}/x"


def test_a_uuid_does_not_see_another_that_starts_with_it(storage: S3Storage, s3) -> None:
    with storage.store_path("abc") as path:
        (path / "a").write_text("1")
    with storage.store_path("abcd") as path:
        (path / "b").write_text("22")
    assert storage.resources("abc") == {"a": 1}
    storage.delete("abc")
    assert storage.resources("abcd") == {"b": 2}


def test_failed_block_uploads_nothing(storage: S3Storage, s3) -> None:
    with pytest.raises(RuntimeError), storage.store_path(UUID) as path:
        (path / "half").write_text("written")
        raise RuntimeError("training crashed mid-checkpoint")
    assert keys(s3) == {}
    assert not storage.exists(UUID)


def test_delete_removes_every_key_in_batches_and_is_idempotent(
    storage: S3Storage, s3, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(S3Storage, "DELETE_BATCH", 2)
    with storage.store_path(UUID) as path:
        for i in range(5):
            (path / f"f{i}").write_text(str(i))
    with storage.store_path("other") as path:
        (path / "keep").write_text("k")
    assert storage.exists(UUID)
    storage.delete(UUID)
    assert not storage.exists(UUID)
    assert list(keys(s3)) == ["team/exp/other/keep"]
    storage.delete(UUID)  # already gone: not an error


def test_open_file_reads_one_object(storage: S3Storage) -> None:
    with storage.store_path(UUID) as path:
        write_tree(path)
    with storage.open_file(UUID, "sub/state.json") as f:
        assert f.read() == b"{}"
    with pytest.raises(NotFound, match=f"s3://{BUCKET}/team/exp/{UUID}/nope"), storage.open_file(UUID, "nope"):
        pass
    with pytest.raises(ValueError, match="invalid path"), storage.open_file(UUID, "../other/keep"):
        pass


def test_large_files_go_up_in_parts(storage: S3Storage) -> None:
    data = bytes(range(256)) * (9 * 1024 * 1024 // 256 + 7)  # above boto3's 8 MiB multipart threshold
    with storage.store_path(UUID) as path:
        (path / "big.bin").write_bytes(data)
    assert storage.resources(UUID) == {"big.bin": len(data)}
    with storage.restore_path(UUID) as path:
        assert (path / "big.bin").read_bytes() == data


def test_restore_of_a_missing_checkpoint_names_where_it_looked(storage: S3Storage) -> None:
    with pytest.raises(CheckpointNotFound) as info, storage.restore_path(UUID):
        pass
    assert isinstance(info.value, FileNotFoundError) and isinstance(info.value, NotFound)
    assert f"s3://{BUCKET}/team/exp/{UUID}/" in str(info.value)
    assert storage.resources(UUID) == {}


def test_missing_bucket_is_not_found_naming_the_bucket(moto_endpoint: str, tmp_path: Path) -> None:
    storage = S3Storage("no-such-bucket", endpoint_url=moto_endpoint)
    with pytest.raises(NotFound, match="the bucket 'no-such-bucket' does not exist"), storage.store_path(UUID) as path:
        (path / "f").write_text("1")
    with pytest.raises(NotFound, match=f"s3://no-such-bucket/{UUID}/"):
        storage.resources(UUID)


def test_no_credentials_is_forbidden_with_a_hint(moto_endpoint: str, s3, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    storage = S3Storage(BUCKET, endpoint_url=moto_endpoint)
    with pytest.raises(Forbidden, match=f"cannot list s3://{BUCKET}/{UUID}/: no usable AWS credentials"):
        storage.resources(UUID)


def test_unreachable_endpoint_is_unavailable_naming_it(moto_endpoint: str) -> None:
    from pedl.common.ports import free_port

    endpoint = f"http://127.0.0.1:{free_port()}"
    client = boto3.client(
        "s3", endpoint_url=endpoint, region_name=REGION, config=Config(retries={"max_attempts": 1}, connect_timeout=2)
    )
    storage = S3Storage(BUCKET, endpoint_url=endpoint, client=client)
    with pytest.raises(Unavailable, match=f"cannot delete s3://{BUCKET}/{UUID}/: .*127.0.0.1"):
        storage.delete(UUID)


@pytest.mark.parametrize(
    ("code", "status", "kind", "text"),
    [
        ("AccessDenied", 403, Forbidden, "access denied (AccessDenied: nope)"),
        ("InvalidAccessKeyId", 403, Forbidden, "access denied"),
        ("NoSuchKey", 404, NotFound, "not found"),
        ("NoSuchBucket", 404, NotFound, "the bucket 'b' does not exist"),
        ("SlowDown", 503, Unavailable, "S3 is unavailable"),
        ("InternalError", 500, Unavailable, "S3 is unavailable"),
        ("InvalidArgument", 400, PedlError, "InvalidArgument: nope"),
    ],
)
def test_client_errors_map_to_pedl_errors(code: str, status: int, kind: type, text: str) -> None:
    exc = ClientError(
        {"Error": {"Code": code, "Message": "nope"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "GetObject"
    )
    mapped = s3_error(exc, "read", "s3://b/k", "b")
    assert type(mapped) is kind
    assert mapped.message.startswith("cannot read s3://b/k: ")
    assert text in mapped.message


def test_other_exceptions_are_not_mapped() -> None:
    assert s3_error(KeyError("x"), "read", "s3://b/k", "b") is None


def test_storage_from_config_builds_s3(moto_endpoint: str) -> None:
    storage = storage_from_config(
        {
            "type": "s3",
            "bucket": BUCKET,
            "prefix": "p",
            "endpoint_url": moto_endpoint,
            "region": REGION,
            "save_trial_best": 2,
        }
    )
    assert isinstance(storage, S3Storage)
    assert (storage.bucket, storage.prefix, storage.endpoint_url, storage.region) == (
        BUCKET,
        "p",
        moto_endpoint,
        REGION,
    )
    assert "s3://pedl-ckpts/p" in repr(storage)


@pytest.fixture
def cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


def test_core_checkpoints_round_trip_through_s3(moto_endpoint: str, s3, cwd: Path) -> None:
    config = {"type": "s3", "bucket": BUCKET, "prefix": "local", "endpoint_url": moto_endpoint}
    with pedl.core.init(checkpoint_storage=config) as core:
        with core.checkpoint.store_path({"steps_completed": 7}) as (path, storage_id):
            (path / "model.txt").write_text("weights")
        assert core.checkpoint.get_metadata(storage_id)["steps_completed"] == 7
        out = cwd / "copy"
        core.checkpoint.download(storage_id, out)
    assert (out / "model.txt").read_text() == "weights"
    assert json.loads((out / "metadata.json").read_text()) == {"steps_completed": 7}
    assert set(keys(s3, f"local/{storage_id}/")) == {
        f"local/{storage_id}/model.txt",
        f"local/{storage_id}/metadata.json",
    }
