"""What the deployed master runs at boot: the agent token made once on the data volume (and read by
the master), TLS files made once per set of addresses, the database login read from Secrets Manager
(moto), the CA published to S3, and a master.yaml written only when it is valid."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import boto3
import pytest
from cryptography import x509

from pedl.common.tls import check_server_pair
from pedl.config.master_config import MasterConfig, load_master_config
from pedl.deploy.master_boot import (
    CA_KEY,
    BootError,
    database_login,
    ensure_agent_token,
    ensure_tls_files,
    main,
    render_master_config,
    write_master_config,
)
from pedl.deploy.master_config_doc import master_config_yaml, tls_files
from pedl.master.agent_token import resolve_agent_token
from tests.deploy.stack_samples import BUCKET, REGION, stack_values
from tests.deploy.template_samples import options_for
from tests.support.moto_server import (  # noqa: F401
    FakeMetadataServer,
    metadata_server_fixture,
    moto_endpoint_fixture,
    moto_server_fixture,
)


def test_the_agent_token_is_made_once_and_the_master_reads_it(tmp_path: Path) -> None:
    assert ensure_agent_token(tmp_path, None) is True
    path = tmp_path / "agent_token"
    token = path.read_text().strip()
    assert len(token) >= 32 and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_agent_token(tmp_path, None) is False
    assert path.read_text().strip() == token
    assert resolve_agent_token(MasterConfig(data_dir=tmp_path)) == token


def test_an_empty_token_file_is_replaced(tmp_path: Path) -> None:
    (tmp_path / "agent_token").write_text("")
    assert ensure_agent_token(tmp_path, None) is True
    assert (tmp_path / "agent_token").read_text().strip()


def _sans(cert: Path) -> set[str]:
    first = x509.load_pem_x509_certificates(cert.read_bytes())[0]
    san = first.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return {str(a) for a in san.get_values_for_type(x509.IPAddress)} | set(san.get_values_for_type(x509.DNSName))


def test_tls_files_are_made_once_per_set_of_addresses(tmp_path: Path) -> None:
    cert, key = (Path(p) for p in tls_files(str(tmp_path)))
    ca = ensure_tls_files(tmp_path, None, ip_addresses=["10.0.0.5"], dns_names=["ip-10-0-0-5.ec2.internal"])
    assert ca is not None and b"BEGIN CERTIFICATE" in ca
    check_server_pair(cert.read_bytes(), key.read_bytes())
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert _sans(cert) == {"10.0.0.5", "ip-10-0-0-5.ec2.internal"}
    assert (cert.parent / "ca.crt").read_bytes() == ca
    before = cert.read_bytes()
    assert ensure_tls_files(tmp_path, None, ip_addresses=["10.0.0.5"], dns_names=[]) is None
    assert cert.read_bytes() == before
    new_ca = ensure_tls_files(tmp_path, None, ip_addresses=["10.0.0.5", "203.0.113.7"], dns_names=[])
    assert new_ca is not None and new_ca != ca
    assert "203.0.113.7" in _sans(cert)
    check_server_pair(cert.read_bytes(), key.read_bytes())


def _secret(endpoint: str, value: dict[str, str]) -> str:
    client = boto3.client("secretsmanager", region_name=REGION, endpoint_url=endpoint)
    return client.create_secret(Name="pedl-demo-db", SecretString=json.dumps(value))["ARN"]


def test_the_database_login_comes_from_secrets_manager(moto_endpoint: str) -> None:
    arn = _secret(moto_endpoint, {"username": "pedl", "password": "pw-from-aws"})
    assert database_login(arn, REGION, moto_endpoint) == ("pedl", "pw-from-aws")


def test_a_missing_or_malformed_secret_says_which(moto_endpoint: str) -> None:
    with pytest.raises(BootError, match="cannot read the database secret nope"):
        database_login("nope", REGION, moto_endpoint)
    arn = _secret(moto_endpoint, {"user": "x"})
    with pytest.raises(BootError, match="no JSON with username and password"):
        database_login(arn, REGION, moto_endpoint)


def test_an_invalid_config_leaves_the_old_one(tmp_path: Path) -> None:
    path = tmp_path / "master.yaml"
    path.write_text("port: 8080\n")
    with pytest.raises(BootError, match="unknown key"):
        write_master_config("port: 8080\nbogus_key: 1\n", path, None)
    assert path.read_text() == "port: 8080\n"
    assert not list(tmp_path.glob(".*"))
    write_master_config("port: 9090\n", path, None)
    assert load_master_config(path).port == 9090
    assert stat.S_IMODE(path.stat().st_mode) == 0o640


def test_a_login_needs_a_db_section() -> None:
    with pytest.raises(BootError, match="no db section"):
        render_master_config("port: 8080\n", ("pedl", "pw"))


def test_boot_end_to_end(
    tmp_path: Path, moto_endpoint: str, metadata_server: FakeMetadataServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """main() as the user data calls it, with db=rds and TLS: the instance's addresses from the metadata
    service, the password from Secrets Manager, the CA published to the bucket."""
    metadata_server.ec2.update(
        {"local-ipv4": "10.42.0.10", "public-ipv4": "54.1.2.3", "local-hostname": "ip-10-42-0-10.ec2.internal"}
    )
    monkeypatch.setenv("PEDL_IMDS_URL", metadata_server.url)
    boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint).create_bucket(Bucket=BUCKET)
    arn = _secret(moto_endpoint, {"username": "pedl", "password": "pw-from-aws"})
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    options = options_for(False, "rds", False, True, True, False)
    template = tmp_path / "master.yaml.in"
    template.write_text(master_config_yaml(options, stack_values(), data_dir=str(data_dir)))
    config = tmp_path / "master.yaml"
    argv = [
        "--config-template",
        str(template),
        "--config",
        str(config),
        "--data-dir",
        str(data_dir),
        "--region",
        REGION,
        "--db-secret",
        arn,
        "--tls",
        "--bucket",
        BUCKET,
        "--tls-ip",
        "203.0.113.77",
        "--endpoint-url",
        moto_endpoint,
    ]
    assert main(argv) == 0
    loaded = load_master_config(config)
    assert loaded.db is not None and loaded.db.password == "pw-from-aws"
    assert (data_dir / "agent_token").exists()
    assert _sans(Path(tls_files(str(data_dir))[0])) >= {
        "10.42.0.10",
        "54.1.2.3",
        "203.0.113.77",
        "ip-10-42-0-10.ec2.internal",
    }
    published = (
        boto3.client("s3", region_name=REGION, endpoint_url=moto_endpoint)
        .get_object(Bucket=BUCKET, Key=CA_KEY)["Body"]
        .read()
    )
    assert published == (data_dir / "tls" / "ca.crt").read_bytes()
    token = (data_dir / "agent_token").read_text()
    assert main(argv) == 0  # every boot: nothing made again
    assert (data_dir / "agent_token").read_text() == token


def test_boot_fails_clearly_when_the_secret_is_unreadable(
    tmp_path: Path, moto_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "master.yaml.in"
    template.write_text(
        master_config_yaml(
            options_for(False, "rds", False, False, False, False), stack_values(), data_dir=str(tmp_path)
        )
    )
    code = main(
        [
            "--config-template",
            str(template),
            "--config",
            str(tmp_path / "master.yaml"),
            "--data-dir",
            str(tmp_path),
            "--region",
            REGION,
            "--db-secret",
            "missing-secret",
            "--endpoint-url",
            moto_endpoint,
        ]
    )
    assert code == 1
    assert "cannot read the database secret missing-secret" in capsys.readouterr().err
    assert not (tmp_path / "master.yaml").exists()
