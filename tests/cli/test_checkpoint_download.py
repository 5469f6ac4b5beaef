"""`pedl checkpoint download|list|describe` against a real master process: the tar the master
streams (shared_fs and S3 on moto), the direct copy of visible shared_fs files, the output
directory rules, progress, and a download that breaks off.

Only a running trial may register a checkpoint, and its files are where its experiment's storage
says: two experiments (shared_fs and S3) each run a trial that hands the test its task token and
sleeps; the test stores files and reports checkpoints with those tokens, as the trials would."""

from __future__ import annotations

import io
import json
import sys
import tarfile
import uuid as uuid_lib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import boto3
import httpx
import pytest
from click.testing import Result
from typer.testing import CliRunner

from pedl.cli import checkpoint_download
from pedl.cli.main import app
from pedl.common.checkpoint_storage import S3Storage, SharedFSStorage
from pedl.devcluster import LocalAgent, Master, agent_connected, wait_for
from pedl.errors import PedlError
from tests.support.moto_server import (  # noqa: F401
    FAKE_AWS_ENV,
    REGION,
    moto_endpoint_fixture,
    moto_server_fixture,
    reset_moto,
)
from tests.support.shared_dirs import enterable_twin

BUCKET = "cli-ckpts"


# A trial that writes its task token (for the test to report with) and sleeps until it is killed.
HOLD_TOKEN = """
import os, pathlib, time
out = pathlib.Path(os.environ["TOKEN_FILE"])
out.with_suffix(".tmp").write_text(os.environ["DET_SESSION_TOKEN"])
out.with_suffix(".tmp").rename(out)
time.sleep(3600)
"""


def reachable(work: Path, name: str) -> Path:
    """`name` in a directory standing for `work` that the trials, run as their user's own uid, may enter
    (tmp_path is root's alone): the checkpoints, and the token files (1777: the trials write them)."""
    path = enterable_twin(work) / name
    if name == "tokens":
        path.mkdir(exist_ok=True)
        path.chmod(0o1777)
    return path


@pytest.fixture(scope="module")
def master(tmp_path_factory: pytest.TempPathFactory, moto_server: str) -> Iterator[Master]:
    work = tmp_path_factory.mktemp("cli-master")
    m = Master(
        work,
        {
            "checkpoint_storage": {"type": "shared_fs", "host_path": str(reachable(work, "ckpts"))},
            "security": {"checkpoint_storage_roots": [f"s3://{BUCKET}"], "s3_endpoint_urls": [moto_server]},
        },
    )
    m.env.update(FAKE_AWS_ENV)  # the master reads S3 checkpoints with these
    m.start()
    agent = LocalAgent(work, m.url, "cli-agent", slots=2, token=m.agent_token).start()
    try:
        wait_for(lambda: agent_connected(m, "cli-agent"), 60, what="the agent to connect")
        yield m
    finally:
        agent.stop()
        m.stop()


def trial_token(master: Master, name: str, storage: dict[str, Any] | None = None) -> str:
    """The task token of a running trial of a new experiment (with `storage`, else the master's)."""
    token_file = reachable(master.work_dir, "tokens") / f"{name}.token"
    config: dict[str, Any] = {
        "name": name,
        "entrypoint": [sys.executable, "-c", HOLD_TOKEN],
        "searcher": {"name": "single", "metric": "loss", "max_length": 1},
        "environment": {"environment_variables": {"TOKEN_FILE": str(token_file)}},
    }
    if storage:
        config["checkpoint_storage"] = storage
    master.api("POST", "/api/v1/experiments", {"config": json.dumps(config), "modelDefinition": [], "activate": True})
    wait_for(token_file.exists, 60, what=f"the trial of {name} to start")
    return token_file.read_text()


@pytest.fixture(scope="module")
def fs_token(master: Master) -> str:
    return trial_token(master, "cli-fs")


@pytest.fixture(scope="module")
def s3_token(master: Master, moto_server: str) -> str:
    return trial_token(master, "cli-s3", {"type": "s3", "bucket": BUCKET, "prefix": "cli", "endpoint_url": moto_server})


@pytest.fixture
def shared(master: Master) -> SharedFSStorage:
    return SharedFSStorage(reachable(master.work_dir, "ckpts"))


@pytest.fixture
def cli(master: Master) -> Callable[..., Result]:
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, ["-m", master.url, *args])

    return run


def write_files(path: Path) -> None:
    (path / "model.bin").write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    (path / "sub" / "empty").mkdir(parents=True)
    (path / "sub" / "state.json").write_text('{"step": 7}')


def check_files(path: Path) -> None:
    assert (path / "model.bin").read_bytes() == bytes(range(256)) * 4096
    assert (path / "sub" / "state.json").read_text() == '{"step": 7}'
    assert (path / "sub" / "empty").is_dir()


def report(master: Master, token: str, uuid: str, resources: dict[str, Any], state: str = "STATE_COMPLETED") -> None:
    """Register a checkpoint as its trial does: with the trial's task token."""
    r = httpx.post(
        f"{master.url}/api/v1/checkpoints",
        headers={"Authorization": f"Bearer {token}"},
        content=json.dumps(
            {
                "uuid": uuid,
                "metadata": {"steps_completed": 7},
                "state": state,
                "resources": {k: str(v) for k, v in resources.items()},
            }
        ),
    )
    assert r.status_code == 200, r.text


@pytest.fixture
def shared_ckpt(master: Master, fs_token: str, shared: SharedFSStorage) -> str:
    uuid = str(uuid_lib.uuid4())
    with shared.store_path(uuid) as path:
        write_files(path)
    report(master, fs_token, uuid, shared.resources(uuid))
    return uuid


def test_download_through_the_master(cli, shared_ckpt: str, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = cli("checkpoint", "download", shared_ckpt, "--output", str(out), "--via-master")
    assert result.exit_code == 0, result.output
    check_files(out)
    assert f"Checkpoint {shared_ckpt} (2 files, 1.0 MiB) is in {out} (streamed from the master)" in result.stdout
    assert not [p for p in tmp_path.iterdir() if "partial" in p.name]  # no staging directory left behind


def test_visible_shared_fs_files_are_copied_directly(
    cli, shared_ckpt: str, shared: SharedFSStorage, tmp_path: Path
) -> None:
    out = tmp_path / "copy"
    result = cli("checkpoint", "download", shared_ckpt, "-o", str(out))
    assert result.exit_code == 0, result.output
    check_files(out)
    assert f"(copied from {shared.path_of(shared_ckpt)})" in result.stdout


def test_files_that_differ_from_the_listing_go_through_the_master(
    cli, shared_ckpt: str, shared: SharedFSStorage, tmp_path: Path
) -> None:
    result = cli("checkpoint", "download", shared_ckpt, "-o", str(tmp_path / "a"))
    assert "copied from" in result.stdout
    (shared.path_of(shared_ckpt) / "extra.txt").write_text("new")  # no longer what the master lists
    result = cli("checkpoint", "download", shared_ckpt, "-o", str(tmp_path / "b"))
    assert result.exit_code == 0 and "streamed from the master" in result.stdout
    assert (tmp_path / "b" / "extra.txt").read_text() == "new"


def test_s3_checkpoints_stream_from_the_bucket(
    cli, master: Master, s3_token: str, moto_endpoint: str, tmp_path: Path
) -> None:
    boto3.client("s3", endpoint_url=moto_endpoint, region_name=REGION).create_bucket(Bucket=BUCKET)
    storage = S3Storage(BUCKET, prefix="cli", endpoint_url=moto_endpoint)
    uuid = str(uuid_lib.uuid4())
    with storage.store_path(uuid) as path:
        write_files(path)
    report(master, s3_token, uuid, storage.resources(uuid))
    out = tmp_path / "s3"
    result = cli("checkpoint", "download", uuid, "-o", str(out))
    assert result.exit_code == 0, result.output
    check_files(out)
    assert "streamed from the master" in result.stdout
    described = cli("checkpoint", "describe", uuid)
    assert f"s3://{BUCKET}/cli/{uuid}/" in described.stdout


def test_default_output_is_checkpoints_uuid(
    cli, shared_ckpt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = cli("checkpoint", "download", shared_ckpt, "--via-master")
    assert result.exit_code == 0, result.output
    check_files(tmp_path / "checkpoints" / shared_ckpt)


def test_an_empty_output_directory_is_used_a_full_one_refused(cli, shared_ckpt: str, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("checkpoint", "download", shared_ckpt, "-o", str(empty)).exit_code == 0
    check_files(empty)
    result = cli("checkpoint", "download", shared_ckpt, "-o", str(empty))
    assert result.exit_code == 1
    assert "the directory is not empty" in result.output
    file = tmp_path / "file"
    file.write_text("x")
    assert "is not a directory" in cli("checkpoint", "download", shared_ckpt, "-o", str(file)).output


def test_unknown_and_deleted_checkpoints_are_errors(cli, master: Master, fs_token: str, tmp_path: Path) -> None:
    result = cli("checkpoint", "download", "no-such-uuid", "-o", str(tmp_path / "x"))
    assert result.exit_code == 1 and "checkpoint no-such-uuid not found" in result.output
    was_deleted = str(uuid_lib.uuid4())
    report(master, fs_token, was_deleted, {"f": 1}, state="STATE_DELETED")
    result = cli("checkpoint", "download", was_deleted, "-o", str(tmp_path / "y"))
    assert result.exit_code == 1 and "was deleted by garbage collection" in result.output
    assert "STATE_" not in result.output  # no wire enum in a human message
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()


def test_progress_lines_when_not_on_a_terminal(
    cli, shared_ckpt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(checkpoint_download, "PLAIN_PROGRESS_EVERY", 0.0)
    monkeypatch.setattr(checkpoint_download, "CHUNK", 64 * 1024)
    result = cli("checkpoint", "download", shared_ckpt, "-o", str(tmp_path / "p"), "--via-master")
    assert result.exit_code == 0, result.output
    lines = [
        line for line in result.stderr.splitlines() if line.startswith(f"Downloading checkpoint {shared_ckpt[:8]}")
    ]
    assert len(lines) >= 4, result.stderr
    assert lines[-1].endswith("of 1.0 MiB")


def test_list_and_describe(cli, master: Master, shared_ckpt: str) -> None:
    listed = cli("checkpoint", "list")
    assert listed.exit_code == 0, listed.output
    assert shared_ckpt in listed.stdout and "COMPLETED" in listed.stdout
    assert shared_ckpt not in cli("checkpoint", "list", "--state", "deleted").stdout
    assert shared_ckpt not in cli("checkpoint", "list", "--experiment", "999").stdout
    described = cli("checkpoint", "describe", shared_ckpt)
    assert str(reachable(master.work_dir, "ckpts") / shared_ckpt) in described.stdout


# -- a download that breaks off -----------------------------------------------------------------


class FakeResponse:
    def __init__(self, data: bytes, length: int | None) -> None:
        self.data = data
        self.headers = {"content-length": str(length)} if length is not None else {}

    def iter_bytes(self, size: int) -> Iterator[bytes]:
        for i in range(0, len(self.data), size):
            yield self.data[i : i + size]


class FakeClient:
    def __init__(self, response: FakeResponse) -> None:
        self.response = response

    def open_stream(self, path: str):  # a context manager, as MasterClient's
        import contextlib

        return contextlib.nullcontext(self.response)


def tar_bytes(files: dict[str, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.mark.parametrize("cut", [100, 700, 2000])
def test_a_short_stream_is_an_error_and_leaves_nothing(tmp_path: Path, cut: int) -> None:
    data = tar_bytes({"a.bin": b"a" * 3000})
    client = FakeClient(FakeResponse(data[:cut], len(data)))
    with pytest.raises(PedlError, match="broke off"):
        checkpoint_download.download_checkpoint(
            client,
            {"uuid": "u1", "resources": {"a.bin": "3000"}},  # type: ignore[arg-type]
            tmp_path / "out",
            via_master=True,
        )
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_entries_outside_the_checkpoint_are_refused(tmp_path: Path) -> None:
    data = tar_bytes({"../escape.txt": b"x"})
    client = FakeClient(FakeResponse(data, len(data)))
    with pytest.raises(PedlError, match="refusing the entry '../escape.txt'"):
        checkpoint_download.download_checkpoint(
            client,
            {"uuid": "u2", "resources": {}},  # type: ignore[arg-type]
            tmp_path / "out",
            via_master=True,
        )
    assert not (tmp_path / "escape.txt").exists()
    assert list(tmp_path.iterdir()) == []  # nothing written
