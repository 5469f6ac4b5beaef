"""Model definitions: downloaded with the session token, unpacked without escaping the directory."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from pedl.agent.context import ContextError, fetch_context, unpack_context

from .conftest import ContextServer, make_tgz


async def test_fetch_with_bearer_token(context_server: ContextServer) -> None:
    url = context_server.add("c1", {"train.py": "print(1)\n"}, token="t1")
    tgz = await fetch_context(url, "t1")
    assert context_server.requests[-1]["Authorization"] == "Bearer t1"
    with tarfile.open(fileobj=io.BytesIO(tgz)) as archive:
        assert archive.getnames() == ["train.py"]


async def test_fetch_errors_name_the_status(context_server: ContextServer) -> None:
    url = context_server.add("c1", {"a": "b"}, token="t1")
    with pytest.raises(ContextError, match="401"):
        await fetch_context(url, "wrong")
    with pytest.raises(ContextError, match="404"):
        await fetch_context(context_server.base_url + "/contexts/missing", "t1")
    bad = context_server.add_raw("bad", b'{"nothing": 1}', token="t1")
    with pytest.raises(ContextError, match="b64Tgz"):
        await fetch_context(bad, "t1")


def test_unpack_nested_files(tmp_path: Path) -> None:
    unpack_context(make_tgz({"model/def.py": "x = 1\n", "const.yaml": "a: 1\n"}), tmp_path)
    assert (tmp_path / "model/def.py").read_text() == "x = 1\n"
    assert (tmp_path / "const.yaml").exists()


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/absolute.txt", "a/../../escape.txt"])
def test_unpack_refuses_escaping_paths(tmp_path: Path, name: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ContextError, match="outside"):
        unpack_context(make_tgz({name: "boom"}), dest)
    assert not (tmp_path / "escape.txt").exists()


def test_unpack_refuses_links_out(tmp_path: Path) -> None:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        link = tarfile.TarInfo("passwd")
        link.type = tarfile.SYMTYPE
        link.linkname = "/etc/passwd"
        archive.addfile(link)
    with pytest.raises(ContextError):
        unpack_context(buf.getvalue(), tmp_path)


def test_unpack_refuses_garbage(tmp_path: Path) -> None:
    with pytest.raises(ContextError, match="not a valid tgz"):
        unpack_context(b"this is not a tarball", tmp_path)


def test_empty_context_is_nothing_to_unpack(tmp_path: Path) -> None:
    unpack_context(b"", tmp_path)
    assert list(tmp_path.iterdir()) == []
