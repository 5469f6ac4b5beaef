"""`pedl master info` for people: labelled fields, enums in words, nothing that says nothing."""

from __future__ import annotations

import json

from tests.cli.fake_master import FakeMaster

PEDL_INFO = {
    "version": "0.38.1",
    "pedlVersion": "0.1.0",
    "masterId": "m-1",
    "clusterId": "c-1",
    "clusterName": "",
    "hasCustomLogo": False,
    "strictJobQueueControl": False,
    "telemetryEnabled": False,
    "rbacEnabled": False,
    "userManagementEnabled": True,
    "product": "PRODUCT_UNSPECIFIED",
    "featureSwitches": [],
}


def test_info_shows_no_wire_enum(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/master", PEDL_INFO)
    result = cli("master", "info")
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "PRODUCT_" not in out and "UNSPECIFIED" not in out and "Product" not in out
    for label, value in [
        ("Version", "0.1.0"),
        ("Determined API", "0.38.1"),
        ("Cluster ID", "c-1"),
        ("Master ID", "m-1"),
        ("User management", "yes"),
        ("Cluster name", "(none)"),
    ]:
        line = next(line for line in out.splitlines() if line.strip().startswith(label))
        assert value in line, (label, out)
    assert "hasCustomLogo" not in out and "Feature switches" not in out


def test_info_names_a_product_and_keeps_unknown_fields(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/master", {**PEDL_INFO, "product": "PRODUCT_COMMUNITY", "branding": "lab"})
    out = cli("master", "info").stdout
    assert "COMMUNITY" in out and "PRODUCT_" not in out and "branding" in out


def test_json_keeps_the_wire_values(cli, master: FakeMaster) -> None:
    master.route("GET", "/api/v1/master", PEDL_INFO)
    assert json.loads(cli("master", "info", "--json").stdout) == PEDL_INFO


def test_info_needs_no_login(cli, master: FakeMaster) -> None:
    """The route is public (as Determined's): `master info` neither logs in nor sends a token."""
    master.route("GET", "/api/v1/master", PEDL_INFO)
    result = cli("master", "info")
    assert result.exit_code == 0, result.output
    assert master.calls("POST", "/api/v1/auth/login") == []
    (req,) = master.calls("GET", "/api/v1/master")
    assert "authorization" not in req.headers
