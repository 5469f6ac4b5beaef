"""master.yaml's `security.tls`: both files or neither, readable, a PEM pair that matches, each
problem naming its field; with TLS the default port is 8443, as in the seeds."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from pedl.config.loading import ConfigError
from pedl.config.master_config import load_master_config
from tests.support.tls import TlsFiles, write_tls_files


@pytest.fixture
def tls(tmp_path: Path) -> TlsFiles:
    return write_tls_files(tmp_path / "tls")


def load(tmp_path: Path, config: dict):  # a MasterConfig
    path = tmp_path / "master.yaml"
    path.write_text(yaml.safe_dump(config))
    return load_master_config(path)


def problems(tmp_path: Path, config: dict) -> list[tuple[str, str]]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, config)
    assert str(tmp_path / "master.yaml") in caught.value.message  # names the file
    return [(p["field"], p["message"]) for p in caught.value.fields]


def test_without_tls_the_master_serves_http_on_8080(tmp_path: Path) -> None:
    cfg = load(tmp_path, {})
    assert not cfg.security.tls.enabled and cfg.port == 8080


def test_a_certificate_and_key_serve_tls_on_8443_unless_a_port_is_set(tmp_path: Path, tls: TlsFiles) -> None:
    cfg = load(tmp_path, {"security": {"tls": {"cert": str(tls.cert), "key": str(tls.key)}}})
    assert cfg.security.tls.enabled
    assert (cfg.security.tls.cert, cfg.security.tls.key) == (tls.cert, tls.key)
    assert cfg.port == 8443
    cfg = load(tmp_path, {"port": 8080, "security": {"tls": {"cert": str(tls.cert), "key": str(tls.key)}}})
    assert cfg.port == 8080


def test_paths_expand_the_home_directory(tmp_path: Path, tls: TlsFiles, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tls.cert.parent))
    cfg = load(tmp_path, {"security": {"tls": {"cert": "~/master-cert.pem", "key": "~/master-key.pem"}}})
    assert cfg.security.tls.cert == tls.cert


@pytest.mark.parametrize("given", ["cert", "key"])
def test_one_without_the_other_is_refused_naming_the_missing_field(tmp_path: Path, tls: TlsFiles, given: str) -> None:
    missing = "key" if given == "cert" else "cert"
    found = problems(tmp_path, {"security": {"tls": {given: str(getattr(tls, given))}}})
    assert found == [(f"security.tls.{missing}", "missing: give both cert and key, or neither")]


def test_an_unreadable_file_is_refused_naming_the_field_and_path(tmp_path: Path, tls: TlsFiles) -> None:
    absent = tmp_path / "absent.pem"
    found = problems(tmp_path, {"security": {"tls": {"cert": str(tls.cert), "key": str(absent)}}})
    assert found == [("security.tls.key", f"cannot read {absent}: No such file or directory")]
    if os.geteuid() != 0:  # root reads any file
        tls.cert.chmod(0)
        found = problems(tmp_path, {"security": {"tls": {"cert": str(tls.cert), "key": str(tls.key)}}})
        assert found == [("security.tls.cert", f"cannot read {tls.cert}: Permission denied")]


def test_files_that_are_no_pem_pair_are_refused_saying_which(tmp_path: Path, tls: TlsFiles) -> None:
    other = write_tls_files(tmp_path / "other")
    found = problems(tmp_path, {"security": {"tls": {"cert": str(tls.cert), "key": str(other.key)}}})
    assert found == [
        ("security.tls.key", f"{other.key}: this private key does not belong to the (first) certificate in cert")
    ]
    found = problems(tmp_path, {"security": {"tls": {"cert": str(tls.key), "key": str(tls.key)}}})
    assert found == [("security.tls.cert", f"{tls.key}: not a PEM certificate (-----BEGIN CERTIFICATE-----)")]


def test_an_unknown_key_under_tls_is_refused(tmp_path: Path, tls: TlsFiles) -> None:
    found = problems(tmp_path, {"security": {"tls": {"cert": str(tls.cert), "key": str(tls.key), "ca": "x"}}})
    assert found == [("security.tls.ca", "unknown key")]


def test_each_user_has_a_uid_of_their_own_by_default_in_a_range_no_account_uses(tmp_path: Path) -> None:
    cfg = load(tmp_path, {})
    assert cfg.security.task_uid_base == 0x70000000 and cfg.security.default_task is None
    # Determined's key stays accepted; null task_uid_base is Determined's behaviour (one shared user)
    cfg = load(
        tmp_path,
        {
            "security": {
                "task_uid_base": None,
                "default_task": {"user": "nobody", "uid": 65534, "group": "nogroup", "gid": 65534},
            }
        },
    )
    assert cfg.security.task_uid_base is None and cfg.security.default_task.uid == 65534
    assert [f for f, _ in problems(tmp_path, {"security": {"task_uid_base": 0}})] == ["security.task_uid_base"]
    assert [f for f, _ in problems(tmp_path, {"security": {"task_uid_base": 2**31 - 1}})] == ["security.task_uid_base"]


def test_a_default_task_among_the_users_own_uids_is_refused(tmp_path: Path) -> None:
    found = problems(
        tmp_path, {"security": {"default_task": {"user": "x", "uid": 0x70000000 + 5, "group": "x", "gid": 100}}}
    )
    assert found[0][0] == "security.default_task.uid" and "security.task_uid_base" in found[0][1]


def test_bind_mount_roots_are_absolute_and_the_pools_defaults_lie_in_them(tmp_path: Path) -> None:
    cfg = load(tmp_path, {"security": {"bind_mounts": {"allowed_roots": ["/data/", "/scratch"]}}})
    assert cfg.security.bind_mounts.allowed_roots == ["/data", "/scratch"]
    assert load(tmp_path, {}).security.bind_mounts.allowed_roots is None  # any host path, as Determined
    found = problems(tmp_path, {"security": {"bind_mounts": {"allowed_roots": ["data"]}}})
    assert found[0][0] == "security.bind_mounts.allowed_roots" and "must be an absolute path" in found[0][1]
    mount = {"host_path": "/etc", "container_path": "/x"}
    gpu = {
        "pool_name": "gpu",
        "task_container_defaults": {"bind_mounts": [{"host_path": "/data/ok", "container_path": "/y"}, mount]},
    }
    found = problems(
        tmp_path,
        {
            "security": {"bind_mounts": {"allowed_roots": ["/data"]}},
            "task_container_defaults": {"bind_mounts": [mount]},
            "resource_pools": [{"pool_name": "default"}, gpu],
        },
    )
    assert [f for f, _ in found] == [
        "task_container_defaults.bind_mounts[0].host_path",
        "resource_pools[1].task_container_defaults.bind_mounts[1].host_path",
    ]
    assert "outside the host paths this cluster allows to mount" in found[0][1]
    found = problems(
        tmp_path,
        {
            "security": {"bind_mounts": {"allowed_roots": []}},
            "task_container_defaults": {"bind_mounts": [{"host_path": "/data/ok", "container_path": "/y"}]},
        },
    )
    assert "host bind mounts are not allowed on this cluster" in found[0][1]
