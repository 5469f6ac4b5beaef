"""master_url: plain URLs are normalized; aliases are resolved through EC2 IMDSv2 or the GCE
metadata server (a fake one here, which refuses requests without the token or flavor header)."""

from __future__ import annotations

import socket

import pytest

from pedl.errors import InvalidArgument, Unavailable
from pedl.master.provisioner.master_address import resolve_master_url
from tests.support.moto_server import FakeMetadataServer, metadata_server_fixture  # noqa: F401


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("10.0.0.5", "http://10.0.0.5:8080"),
        ("10.0.0.5:9000", "http://10.0.0.5:9000"),
        ("https://master.example.com", "https://master.example.com:8080"),
        ("http://master.example.com:8443/", "http://master.example.com:8443"),
    ],
)
def test_plain_urls_pass_through_with_scheme_and_port(url: str, expected: str) -> None:
    assert resolve_master_url(url, imds_url="http://127.0.0.1:9", gce_url="http://127.0.0.1:9") == expected


def test_a_malformed_url_is_invalid() -> None:
    with pytest.raises(InvalidArgument, match="master_url"):
        resolve_master_url("http://a b")


@pytest.mark.parametrize(
    ("alias", "key", "value", "expected"),
    [
        ("ec2.local-ipv4", "local-ipv4", "10.1.2.3", "http://10.1.2.3:8080"),
        ("ec2.public-ipv4:80", "public-ipv4", "54.1.2.3", "http://54.1.2.3:80"),
        ("ec2.local-hostname", "local-hostname", "ip-10-1-2-3.ec2.internal", "http://ip-10-1-2-3.ec2.internal:8080"),
        (
            "https://ec2.public-hostname:8443",
            "public-hostname",
            "ec2-54-1-2-3.compute-1.amazonaws.com",
            "https://ec2-54-1-2-3.compute-1.amazonaws.com:8443",
        ),
    ],
)
def test_ec2_aliases_resolve_through_imdsv2(
    metadata_server: FakeMetadataServer, alias: str, key: str, value: str, expected: str
) -> None:
    metadata_server.ec2[key] = value
    assert resolve_master_url(alias, imds_url=metadata_server.url) == expected
    # a session token first (PUT), then the key with the token (the fake answers 401 without it)
    assert metadata_server.requests == [("PUT", "/latest/api/token", False), ("GET", f"/latest/meta-data/{key}", True)]


def test_no_master_url_means_the_local_ipv4_alias(metadata_server: FakeMetadataServer) -> None:
    metadata_server.ec2["local-ipv4"] = "10.9.8.7"
    assert resolve_master_url(None, imds_url=metadata_server.url) == "http://10.9.8.7:8080"


def test_env_overrides_the_default_metadata_urls(
    metadata_server: FakeMetadataServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    metadata_server.ec2["local-ipv4"] = "10.0.0.1"
    metadata_server.gce["instance/network-interfaces/0/ip"] = "10.128.0.2"
    monkeypatch.setenv("PEDL_IMDS_URL", metadata_server.url)
    monkeypatch.setenv("PEDL_GCE_METADATA_URL", metadata_server.url)
    assert resolve_master_url("ec2.local-ipv4") == "http://10.0.0.1:8080"
    assert resolve_master_url("gce.internal-ip:9090") == "http://10.128.0.2:9090"


@pytest.mark.parametrize(
    ("alias", "path", "value", "expected"),
    [
        ("gce.internal-ip", "instance/network-interfaces/0/ip", "10.128.0.2", "http://10.128.0.2:8080"),
        (
            "gce.external-ip:80",
            "instance/network-interfaces/0/access-configs/0/external-ip",
            "34.1.2.3",
            "http://34.1.2.3:80",
        ),
    ],
)
def test_gce_aliases_resolve_through_the_metadata_server(
    metadata_server: FakeMetadataServer, alias: str, path: str, value: str, expected: str
) -> None:
    metadata_server.gce[path] = value
    assert resolve_master_url(alias, gce_url=metadata_server.url) == expected
    assert metadata_server.requests == [("GET", f"/computeMetadata/v1/{path}", True)]


def test_an_address_the_instance_lacks_is_a_clear_error(metadata_server: FakeMetadataServer) -> None:
    with pytest.raises(Unavailable) as info:  # no public-ipv4: IMDS answers 404
        resolve_master_url("ec2.public-ipv4", imds_url=metadata_server.url)
    msg = info.value.message
    assert "ec2.public-ipv4" in msg and f"{metadata_server.url}/latest/meta-data/public-ipv4" in msg
    assert "404" in msg


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_unreachable_metadata_service_names_alias_and_url() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(Unavailable) as info:
        resolve_master_url("ec2.local-ipv4", imds_url=url, timeout=1.0)
    assert "ec2.local-ipv4" in info.value.message and f"{url}/latest/meta-data/local-ipv4" in info.value.message
    with pytest.raises(Unavailable) as info:
        resolve_master_url("gce.external-ip", gce_url=url, timeout=1.0)
    assert "gce.external-ip" in info.value.message and url in info.value.message
