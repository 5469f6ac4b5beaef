"""The master.yaml the deployed master runs with passes the master's own config validation
(load_master_config), with the pool, tag pair, storage, database and TLS the deploy asked for."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pedl.config.master_config import load_master_config
from pedl.deploy.master_boot import ensure_tls_files, render_master_config
from pedl.deploy.master_config_doc import master_config_document, master_config_yaml, stack_placeholders, tls_files
from pedl.master.provisioner.master_address import resolve_master_url
from tests.deploy.stack_samples import (
    AGENT_AMI,
    AGENT_PROFILE,
    AGENT_SG,
    BUCKET,
    CREATED_SUBNET,
    DB_HOST,
    REGION,
    stack_values,
)
from tests.deploy.template_samples import SUBNET, options_for
from tests.support.moto_server import FakeMetadataServer, metadata_server_fixture  # noqa: F401


def load(tmp_path: Path, options: Any, *, login: tuple[str, str] | None = None) -> Any:
    """What the instance does: the template's master.yaml, the login added, TLS files made, then loaded."""
    data_dir = tmp_path / "data"
    data_dir.mkdir(exist_ok=True)
    values = stack_values(subnet=SUBNET if options.subnet_id else None, rds=options.db == "rds")
    text = render_master_config(master_config_yaml(options, values, data_dir=str(data_dir)), login)
    if options.tls:
        ensure_tls_files(data_dir, None, ip_addresses=["10.42.0.10"], dns_names=["ip-10-42-0-10.ec2.internal"])
    path = tmp_path / "master.yaml"
    path.write_text(text)
    return load_master_config(path)


@pytest.mark.parametrize("spot", [False, True])
@pytest.mark.parametrize("db", ["embedded", "rds"])
@pytest.mark.parametrize("vpc", [False, True])
@pytest.mark.parametrize("tls", [False, True])
def test_the_master_config_loads(tmp_path: Path, spot: bool, db: str, vpc: bool, tls: bool) -> None:
    options = options_for(spot, db, vpc, tls, False, False)
    config = load(tmp_path, options, login=("pedl", "s3cret-from-secrets-manager") if db == "rds" else None)
    (pool,) = config.resource_pools
    provider = pool.provider
    assert provider is not None and provider.type == "aws"
    assert provider.master_url == ("https://ec2.local-ipv4:8443" if tls else "ec2.local-ipv4")
    assert (provider.tag_key, provider.tag_value) == ("pedl-cluster", "demo")
    assert provider.region == REGION and provider.image_id == AGENT_AMI
    assert provider.ssh_key_name == "demo-key" and provider.instance_types() == ["g5.xlarge"]
    assert provider.max_instances == 5 and provider.spot is spot
    assert provider.iam_instance_profile_arn == AGENT_PROFILE
    assert provider.network_interface.security_group_id == AGENT_SG
    assert provider.network_interface.subnet_id == (SUBNET if vpc else CREATED_SUBNET)
    assert provider.network_interface.public_ip is True
    storage = config.effective_checkpoint_storage()
    assert storage.type == "s3" and storage.bucket == BUCKET and storage.region == REGION
    assert config.data_dir == tmp_path / "data"
    assert config.agent_token is None  # the token lives on the data volume, made at first boot
    assert config.port == (8443 if tls else 8080)
    if db == "rds":
        assert config.db is not None and (config.db.host, config.db.port, config.db.name) == (DB_HOST, 5432, "pedl")
        assert (config.db.user, config.db.password, config.db.ssl_mode) == (
            "pedl",
            "s3cret-from-secrets-manager",
            "require",
        )
    else:
        assert config.db is None and config.database_url().startswith(f"sqlite:///{tmp_path / 'data'}")
    if tls:
        cert, key = tls_files(str(tmp_path / "data"))
        assert (config.security.tls.cert, config.security.tls.key) == (Path(cert), Path(key))


def test_the_master_config_of_the_template_has_no_password() -> None:
    doc = master_config_document(options_for(False, "rds", False, False, False, False), stack_values())
    assert "password" not in doc["db"] and "agent_token" not in doc
    assert "password" not in master_config_yaml(options_for(False, "rds", False, False, False, False), stack_values())


def test_the_placeholders_are_what_the_template_fills() -> None:
    options = options_for(False, "rds", False, True, False, False)
    text = master_config_yaml(options, stack_placeholders(options))
    for placeholder in (
        "${CheckpointBucket}",
        "${AWS::Region}",
        "${AgentImageId}",
        "${AgentSecurityGroup.GroupId}",
        "${PublicSubnet}",
        "${AgentInstanceProfile.Arn}",
        "${DatabaseHost}",
    ):
        assert placeholder in text, placeholder


@pytest.mark.parametrize(("tls", "url"), [(False, "http://10.42.0.10:8080"), (True, "https://10.42.0.10:8443")])
def test_agents_reach_the_master_at_its_private_address(
    metadata_server: FakeMetadataServer, tls: bool, url: str
) -> None:
    metadata_server.ec2["local-ipv4"] = "10.42.0.10"
    doc = master_config_document(options_for(False, "embedded", False, tls, False, False), stack_values(rds=False))
    master_url = doc["resource_pools"][0]["provider"]["master_url"]
    assert resolve_master_url(master_url, imds_url=metadata_server.url) == url


def test_a_missing_database_host_is_refused() -> None:
    with pytest.raises(ValueError, match="db_host"):
        master_config_document(options_for(False, "rds", False, False, False, False), stack_values(rds=False))
