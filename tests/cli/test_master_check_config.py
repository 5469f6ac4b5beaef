"""`pedl master check-config FILE`: a summary and status 0 for a config a master would start on;
each problem with its field and status 1 otherwise, including what fails only at start."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pedl.cli.main import app
from pedl.config.security_config import SecurityConfig
from tests.master.test_config_check import self_signed


def check(*args: str):
    return CliRunner().invoke(app, ["master", "check-config", *args])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "master.yaml"
    path.write_text(text)
    return path


def test_a_good_config_prints_its_summary(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""\
port: 8090
data_dir: {tmp_path / "data"}
db: {{host: db.lab, name: pedl, user: pedl, password: s3cret}}
checkpoint_storage: {{type: s3, bucket: my-ckpts, prefix: pedl}}
resource_pools:
  - pool_name: default
  - pool_name: gpu
    provider: {{type: aws, region: us-west-2, image_id: ami-12345, instance_type: p3.8xlarge, max_instances: 5,
               master_url: ec2.local-ipv4, tag_key: pedl-cluster, tag_value: demo, ssh_key_name: k}}
""",
    )
    result = check(str(path))
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"{path}: OK" in out
    assert "postgresql://pedl@db.lab:5432/pedl" in out and "s3cret" not in out  # never the password
    assert "default: static agents (no provider)" in out and "gpu: aws provider, p3.8xlarge, 0 to 5 instances" in out
    assert "s3 s3://my-ckpts/pedl" in out and "http://0.0.0.0:8090" in out
    assert not (tmp_path / "data").exists()  # nothing started, nothing created


def test_field_problems_are_listed_each_with_its_field(tmp_path: Path) -> None:
    path = write(tmp_path, "port: 99999\nbogus: 1\nresource_pools: [{pool_name: default, provider: {type: gce}}]\n")
    result = check(str(path))
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert any(line.strip().startswith("port:") for line in lines)
    assert any(line.strip() == "bogus: unknown key" for line in lines)
    assert any(line.strip().startswith("resource_pools[0].provider") for line in lines)
    assert "3 problem(s)" in result.output


def test_what_fails_only_at_start_is_reported(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("")
    path = write(tmp_path, f"data_dir: {tmp_path / 'a-file' / 'data'}\ncheckpoint_storage: {{host_path: ckpts}}\n")
    result = check(str(path))
    assert result.exit_code == 1
    assert "a master would not start on it" in result.output
    assert (
        f"data_dir: cannot create {tmp_path / 'a-file' / 'data'}: {tmp_path / 'a-file'} is not a directory"
        in result.output
    )
    assert "checkpoint_storage.host_path: 'ckpts' must be an absolute path" in result.output


def test_unreadable_and_malformed_files(tmp_path: Path) -> None:
    result = check(str(tmp_path / "absent.yaml"))
    assert result.exit_code == 1 and "cannot read" in result.output and "absent.yaml" in result.output
    result = check(str(write(tmp_path, "port: [\n")))
    assert result.exit_code == 1 and "malformed YAML" in result.output and "line 2" in result.output


def test_without_a_file_it_checks_the_one_master_run_would_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, f"data_dir: {tmp_path / 'data'}\n")
    monkeypatch.setenv("PEDL_CONFIG_PATHS", f"{tmp_path / 'none.yaml'}{os.pathsep}{path}")
    result = check()
    assert result.exit_code == 0, result.output
    assert f"{path}: OK" in result.output
    monkeypatch.setenv("PEDL_CONFIG_PATHS", "")
    result = check()
    assert result.exit_code == 1 and "no config file given" in result.output


@pytest.mark.skipif("tls" not in SecurityConfig.model_fields, reason="this pedl has no security.tls")
def test_a_tls_config_is_checked_and_summarized(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, "a")
    _, other_key = self_signed(tmp_path, "b")
    good = write(tmp_path, f"data_dir: {tmp_path / 'data'}\nsecurity: {{tls: {{cert: {cert}, key: {key}}}}}\n")
    result = check(str(good))
    assert result.exit_code == 0, result.output
    assert "https://0.0.0.0:" in result.output
    bad = write(tmp_path, f"data_dir: {tmp_path / 'data'}\nsecurity: {{tls: {{cert: {cert}, key: {other_key}}}}}\n")
    result = check(str(bad))
    assert result.exit_code == 1 and "security.tls" in result.output
