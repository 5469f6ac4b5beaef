"""Model definitions: det's v1File list to a gzipped tar and back, refusing what must not be
stored (bad base64, paths escaping the directory, too much data); uploads read at once and a user's
stored bytes, bounded."""

from __future__ import annotations

import base64
import io
import os
import tarfile

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from pedl.errors import InvalidArgument
from pedl.master.tasks import model_definitions as md
from tests.master.fakes import SINGLE_CONFIG, post
from tests.master.other_users import make_user


def entry(path: str, data: bytes = b"", *, directory: bool = False, mode: int | None = None) -> dict:
    return {
        "path": path,
        "type": md.FILE_TYPE_DIR if directory else md.FILE_TYPE_REG,
        "content": "" if directory else base64.b64encode(data).decode(),
        "mtime": "1700000000",
        "mode": mode if mode is not None else (0o40755 if directory else 0o100644),
        "uid": 0,
        "gid": 0,
    }


def members(tgz: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
    out = {}
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isfile() else None
            out[m.name] = (m, f.read() if f else None)
    return out


def test_round_trip_files_and_directories() -> None:
    files = [
        entry("pkg", directory=True),
        entry("pkg/mod.py", b"A = 1\n"),
        entry("run.sh", b"#!/bin/sh\necho hi\n", mode=0o100755),
        entry("empty.txt"),
    ]
    tgz, size, count = md.files_to_tgz(files)
    assert count == 4
    assert size == len(b"A = 1\n") + len(b"#!/bin/sh\necho hi\n")
    got = members(tgz)
    assert got["pkg"][0].isdir() and got["pkg"][0].mode == 0o755
    assert got["pkg/mod.py"][1] == b"A = 1\n"
    assert got["run.sh"][0].mode == 0o755
    assert got["empty.txt"][1] == b""
    assert got["pkg/mod.py"][0].mtime == 1700000000


def test_no_files_is_an_empty_archive() -> None:
    for files in (None, []):
        tgz, size, count = md.files_to_tgz(files)
        assert (size, count) == (0, 0)
        assert members(tgz) == {}


def test_paths_are_normalized_inside_the_directory() -> None:
    tgz, _, _ = md.files_to_tgz([entry("a/./b/../c.py", b"x")])
    assert list(members(tgz)) == ["a/c.py"]


@pytest.mark.parametrize("path", ["../x", "a/../../x", "/etc/passwd", "..", "a/b/../../../x"])
def test_paths_escaping_the_directory_are_refused(path: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        md.files_to_tgz([entry("ok", b"1"), entry(path, b"evil")])
    assert info.value.fields == [
        {"field": "modelDefinition[1].path", "message": f"{path!r} escapes the model directory"}
    ]


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"path": "a", "type": 48, "content": "%%%"}, "content"),
        ({"path": "a", "type": 48, "content": "YQ"}, "content"),  # missing padding
        ({"path": "a", "type": 48, "content": 5}, "content"),
        ({"path": "a", "type": 99}, "type"),
        ({"path": "a", "type": 48, "mode": "rw"}, "mode"),
        ({"path": "", "type": 48}, "path"),
        ({"type": 48}, "path"),
    ],
)
def test_bad_entries_name_their_field(bad: dict, field: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        md.files_to_tgz([bad])
    assert info.value.fields[0]["field"] == f"modelDefinition[0].{field}"


def test_not_a_list() -> None:
    with pytest.raises(InvalidArgument, match="modelDefinition"):
        md.files_to_tgz({"path": "a"})


def test_size_limit_counts_decoded_bytes_over_all_files() -> None:
    files = [entry("a", b"x" * 60), entry("b", b"y" * 60)]
    assert md.files_to_tgz(files, max_bytes=120)[1] == 120
    with pytest.raises(InvalidArgument) as info:
        md.files_to_tgz(files, max_bytes=119)
    assert info.value.fields == [{"field": "modelDefinition", "message": "too large"}]


def test_default_limit_is_read_at_call_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(md, "MAX_MODEL_DEF_BYTES", 10)
    with pytest.raises(InvalidArgument, match="exceeds"):
        md.files_to_tgz([entry("a", b"x" * 11)])


def test_det_limit_is_at_least_what_the_client_allows() -> None:
    assert md.MAX_MODEL_DEF_BYTES >= 96 * 1024 * 1024 - 1024 * 1024


def test_b64_tgz() -> None:
    tgz, _, _ = md.files_to_tgz([entry("a", b"1")])
    assert base64.b64decode(md.b64_tgz(tgz)) == tgz


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("mtime", 1e30, "must be between 0 and 8589934591"),
        ("mtime", str(10**30), "must be between 0 and 8589934591"),
        ("mtime", "1e30", "must be an integer"),
        ("mtime", "9" * 5000, "must be an integer"),
        ("mtime", -1, "must be between 0 and 8589934591"),
        ("mtime", 1.5, "must be an integer"),
        ("mtime", True, "must be an integer"),
        ("mode", 2**40, "must be between 0 and 65535"),
        ("mode", [1], "must be an integer"),
    ],
)
def test_numbers_that_would_fail_on_the_agent_are_refused(key: str, value: object, message: str) -> None:
    """An mtime of 1e30 was stored, and the trial died unpacking it with OverflowError."""
    with pytest.raises(InvalidArgument) as info:
        md.files_to_tgz([entry("ok.py", b"1"), {**entry("a.py", b"x"), key: value}])
    assert info.value.fields == [{"field": f"modelDefinition[1].{key}", "message": message}]


def test_largest_mtime_round_trips() -> None:
    tgz, _, _ = md.files_to_tgz([{**entry("a.py", b"x"), "mtime": str(2**33 - 1)}])
    assert members(tgz)["a.py"][0].mtime == 2**33 - 1


@pytest.mark.parametrize("path", ["a\x00b", "a\nb", "\x1b[31m", "a\x7fb", "dir\\file.py", "a" * 4097, "\ud800"])
def test_paths_a_tar_or_the_agent_would_change_are_refused(path: str) -> None:
    """The path "a\\x00b" was stored, then unpacked as "a"."""
    with pytest.raises(InvalidArgument) as info:
        md.files_to_tgz([entry(path, b"x")])
    assert info.value.fields[0]["field"] == "modelDefinition[0].path"


def _create(client: TestClient, headers: dict, data: bytes = b"x\n", raw: str | None = None):
    body = {"activate": False, "config": SINGLE_CONFIG, "modelDefinition": [entry("train.py", data)]}
    return post(client, "/api/v1/experiments", body, headers, raw=raw)


def _limits(app: FastAPI, monkeypatch: pytest.MonkeyPatch, **limits: int) -> None:
    for key, value in limits.items():  # the one config the routes and the cluster's operations read
        monkeypatch.setattr(app.state.ctx.config.limits, key, value)


def test_uploads_read_at_once_are_bounded_per_user_and_in_total_before_the_body_is_read(
    app: FastAPI, client: TestClient, admin: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two uploads of alice's are being read (their slots taken, as the route takes them before reading a
    body): her third is a 429 naming the setting, answered before its body is read (a body that is not even
    JSON); bob's goes on until the master's total is reached. A slot comes back when its upload is done."""
    alice, bob = make_user(client, admin, "alice"), make_user(client, admin, "bob")
    ctx = app.state.ctx
    ids = {u["username"]: u["id"] for u in client.get("/api/v1/users", headers=admin).json()["users"]}
    _limits(app, monkeypatch, max_concurrent_uploads_per_user=2, max_concurrent_uploads=3)
    held = [md.upload_slot(ctx, ids["alice"]) for _ in range(2)]
    r = _create(client, alice, raw="{not json")
    assert r.status_code == 429 and "limits.max_concurrent_uploads_per_user" in r.json()["message"], r.text
    assert r.headers["Retry-After"] == "1"
    assert _create(client, bob).status_code == 200
    held.append(md.upload_slot(ctx, ids["bob"]))  # bob's upload in progress: 3 in all
    r = _create(client, bob)
    assert r.status_code == 429 and "(limits.max_concurrent_uploads)" in r.json()["message"], r.text
    for slot in held:
        slot.release()
    assert _create(client, alice).status_code == 200
    assert ctx.uploads.held() == 0  # every request's slot came back, refused or not


def test_a_users_stored_model_definitions_are_bounded(
    app: FastAPI, client: TestClient, admin: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """limits.max_model_definition_bytes_per_user counts what the master stores of a user's experiments' model
    definitions: past it a create is a 413 naming modelDefinition and the setting, nothing stored; deleting
    an experiment (or another user's) frees it."""
    alice, bob = make_user(client, admin, "alice"), make_user(client, admin, "bob")
    noise = os.urandom(20_000)  # compresses to about itself
    first = _create(client, alice, noise)
    assert first.status_code == 200, first.text
    _limits(app, monkeypatch, max_model_definition_bytes_per_user=30_000)
    before = client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"]
    r = _create(client, alice, noise)
    assert r.status_code == 413 and r.json()["fields"][0]["field"] == "modelDefinition", r.text
    assert "limits.max_model_definition_bytes_per_user" in r.json()["message"]
    assert client.get("/api/v1/experiments", headers=admin).json()["pagination"]["total"] == before
    assert _create(client, bob, noise).status_code == 200  # his own bytes
    exp_id = first.json()["experiment"]["id"]
    assert post(client, f"/api/v1/experiments/{exp_id}/kill", None, alice).status_code == 200
    assert client.delete(f"/api/v1/experiments/{exp_id}", headers=alice).status_code == 200
    app.state.experiment_deletion.run_pending()  # (or the master's own worker did it first)
    with app.state.ctx.db.read_session() as s:
        assert md.stored_bytes(s, first.json()["experiment"]["userId"]) == 0
    assert _create(client, alice, noise).status_code == 200
