"""The master's agent token: created on first start (owner-only), reused later, overridden by
master.yaml, and refused when its file is readable by others."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from pedl.config.master_config import MasterConfig
from pedl.errors import Unavailable
from pedl.master.agent_token import resolve_agent_token, token_path


def _config(tmp_path: Path, **update: object) -> MasterConfig:
    return MasterConfig(data_dir=tmp_path / "data", port=0).model_copy(update=update)


def test_created_on_first_start_with_owner_only_permissions(tmp_path: Path) -> None:
    old = os.umask(0)  # even with a permissive umask the file is never readable by others
    try:
        token = resolve_agent_token(_config(tmp_path))
    finally:
        os.umask(old)
    path = tmp_path / "data" / "agent_token"
    assert token_path(tmp_path / "data") == path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == token
    assert len(token) >= 40  # secrets.token_urlsafe(32): 43 characters


def test_reused_on_later_starts(tmp_path: Path) -> None:
    first = resolve_agent_token(_config(tmp_path))
    assert resolve_agent_token(_config(tmp_path)) == first
    assert resolve_agent_token(_config(tmp_path / "other")) != first


def test_the_configured_token_wins_and_no_file_is_made(tmp_path: Path) -> None:
    assert resolve_agent_token(_config(tmp_path, agent_token="from-yaml")) == "from-yaml"
    assert not token_path(tmp_path / "data").exists()
    resolve_agent_token(_config(tmp_path))
    assert resolve_agent_token(_config(tmp_path, agent_token="from-yaml")) == "from-yaml"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_a_file_others_may_read_is_refused(tmp_path: Path, mode: int) -> None:
    resolve_agent_token(_config(tmp_path))
    path = token_path(tmp_path / "data")
    path.chmod(mode)
    with pytest.raises(Unavailable, match="chmod 600") as info:
        resolve_agent_token(_config(tmp_path))
    assert str(path) in info.value.message


def test_a_symlink_is_refused(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    target = tmp_path / "elsewhere"
    target.write_text("planted\n")
    target.chmod(0o600)
    token_path(tmp_path / "data").symlink_to(target)
    with pytest.raises(Unavailable, match="agent token"):
        resolve_agent_token(_config(tmp_path))


def test_an_empty_file_left_by_a_crash_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    path = token_path(tmp_path / "data")
    path.touch(mode=0o600)
    token = resolve_agent_token(_config(tmp_path))
    assert token and path.read_text().strip() == token
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_local_provider_hands_the_resolved_token_and_aws_instances_get_secrets_of_their_own(tmp_path: Path) -> None:
    from pedl.master.agents import credentials as agent_credentials
    from pedl.master.app import create_app
    from pedl.master.wiring import make_provider

    aws = {
        "type": "aws",
        "region": "us-east-1",
        "endpoint_url": "http://127.0.0.1:9",
        "image_id": "ami-1",
        "ssh_key_name": "k",
        "master_url": "http://10.0.0.1:8080",
    }
    config = MasterConfig.model_validate(
        {
            "data_dir": str(tmp_path / "data"),
            "port": 0,
            "resource_pools": [
                {"pool_name": "default", "provider": {"type": "local"}},
                {"pool_name": "aws", "provider": aws},
            ],
        }
    )
    ctx = create_app(config).state.ctx
    try:
        assert ctx.agent_token == token_path(tmp_path / "data").read_text().strip()
        local, cloud = (make_provider(pool, ctx) for pool in config.resource_pools)
        assert local.agent_token == ctx.agent_token
        # user data is readable on the instance: the AWS provider never has the cluster's token
        assert not hasattr(cloud, "agent_token")
        assert isinstance(cloud.instance_secrets, agent_credentials.InstanceSecrets)
        secret = cloud.instance_secrets.issue("launch-1")
        assert secret != ctx.agent_token and agent_credentials.may_download(ctx, secret)
    finally:
        ctx.db.dispose()
