"""Model definitions: det's v1File list to a gzipped tar and back, refusing what must not be
stored (bad base64, paths escaping the directory, too much data)."""

from __future__ import annotations

import base64
import io
import tarfile

import pytest

from pedl.errors import InvalidArgument
from pedl.master.services import model_definitions as md


def entry(path: str, data: bytes = b"", *, directory: bool = False, mode: int | None = None) -> dict:
    return {"path": path, "type": md.FILE_TYPE_DIR if directory else md.FILE_TYPE_REG,
            "content": "" if directory else base64.b64encode(data).decode(), "mtime": "1700000000",
            "mode": mode if mode is not None else (0o40755 if directory else 0o100644), "uid": 0, "gid": 0}


def members(tgz: bytes) -> dict[str, tuple[tarfile.TarInfo, bytes | None]]:
    out = {}
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        for m in tar.getmembers():
            f = tar.extractfile(m) if m.isfile() else None
            out[m.name] = (m, f.read() if f else None)
    return out


def test_round_trip_files_and_directories() -> None:
    files = [entry("pkg", directory=True), entry("pkg/mod.py", b"A = 1\n"),
             entry("run.sh", b"#!/bin/sh\necho hi\n", mode=0o100755), entry("empty.txt")]
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
    assert info.value.fields == [{"field": "modelDefinition[1].path",
                                  "message": f"{path!r} escapes the model directory"}]


@pytest.mark.parametrize(
    ("bad", "field"),
    [({"path": "a", "type": 48, "content": "%%%"}, "content"),
     ({"path": "a", "type": 48, "content": "YQ"}, "content"),  # missing padding
     ({"path": "a", "type": 48, "content": 5}, "content"),
     ({"path": "a", "type": 99}, "type"),
     ({"path": "a", "type": 48, "mode": "rw"}, "mode"),
     ({"path": "", "type": 48}, "path"),
     ({"type": 48}, "path")],
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


@pytest.mark.parametrize(("key", "value", "message"), [
    ("mtime", 1e30, "must be between 0 and 8589934591"),
    ("mtime", str(10**30), "must be between 0 and 8589934591"),
    ("mtime", "1e30", "must be an integer"),
    ("mtime", "9" * 5000, "must be an integer"),
    ("mtime", -1, "must be between 0 and 8589934591"),
    ("mtime", 1.5, "must be an integer"),
    ("mtime", True, "must be an integer"),
    ("mode", 2**40, "must be between 0 and 65535"),
    ("mode", [1], "must be an integer"),
])
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
