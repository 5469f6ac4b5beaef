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


@pytest.fixture(params=["data_filter", "before_3_11_4"])
def tar_filter(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each unpack test runs with tarfile's "data" filter and as on a Python without it (3.11.2)."""
    if request.param == "before_3_11_4":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def tgz_of(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as archive:
        for info, data in members:
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def test_unpack_drops_setuid_bits(tmp_path: Path, tar_filter: str) -> None:
    info = tarfile.TarInfo("run.sh")
    info.mode = 0o4777
    unpack_context(tgz_of((info, b"#!/bin/sh\n")), tmp_path)
    mode = (tmp_path / "run.sh").stat().st_mode
    assert not mode & 0o4000 and not mode & 0o002  # no setuid, nobody else may write it


def test_unpack_refuses_devices(tmp_path: Path, tar_filter: str) -> None:
    info = tarfile.TarInfo("null")
    info.type = tarfile.CHRTYPE
    with pytest.raises(ContextError):
        unpack_context(tgz_of((info, b"")), tmp_path)
    assert not (tmp_path / "null").exists()


def test_unpack_keeps_a_link_inside(tmp_path: Path, tar_filter: str) -> None:
    link = tarfile.TarInfo("alias.py")
    link.type = tarfile.SYMTYPE
    link.linkname = "model.py"
    unpack_context(tgz_of((tarfile.TarInfo("model.py"), b"x = 1\n"), (link, b"")), tmp_path)
    assert (tmp_path / "alias.py").read_text() == "x = 1\n"


def test_unpack_nested_files(tmp_path: Path, tar_filter: str) -> None:
    unpack_context(make_tgz({"model/def.py": "x = 1\n", "const.yaml": "a: 1\n"}), tmp_path)
    assert (tmp_path / "model/def.py").read_text() == "x = 1\n"
    assert (tmp_path / "const.yaml").exists()


@pytest.mark.parametrize("name", ["../escape.txt", "/tmp/absolute.txt", "a/../../escape.txt"])
def test_unpack_refuses_escaping_paths(tmp_path: Path, name: str, tar_filter: str) -> None:
    dest = tmp_path / "dest"
    dest.mkdir()
    with pytest.raises(ContextError, match="outside"):
        unpack_context(make_tgz({name: "boom"}), dest)
    assert not (tmp_path / "escape.txt").exists()


def test_unpack_refuses_links_out(tmp_path: Path, tar_filter: str) -> None:
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


async def test_fetch_over_https_verifies_the_master_and_refuses_a_wrong_ca_at_once(tmp_path: Path) -> None:
    import base64

    from pedl.common.master_trust import client_ssl_context
    from tests.support.tls import https_json_server, write_tls_files

    tls = write_tls_files(tmp_path / "tls")
    body = {"b64Tgz": base64.b64encode(make_tgz({"train.py": "print(1)\n"})).decode()}
    with https_json_server(tls, body) as (url, paths):
        tgz = await fetch_context(f"{url}/ctx", "t1", client_ssl_context(tls.ca), tls.ca)
        with tarfile.open(fileobj=io.BytesIO(tgz)) as archive:
            assert archive.getnames() == ["train.py"]
        with pytest.raises(ContextError, match=f"could not be verified against the CA in {tls.other_ca}"):
            await fetch_context(f"{url}/ctx", "t1", client_ssl_context(tls.other_ca), tls.other_ca)
    assert paths == ["/ctx"]
