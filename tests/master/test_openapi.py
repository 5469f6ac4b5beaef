"""The OpenAPI document describes the API as it answers: request bodies, the security schemes, 400
(never FastAPI's 422), and a 405 that carries Allow. schemathesis checks the rest against a live master."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from pedl.config.master_config import MasterConfig
from pedl.master.app import create_app

PUBLIC = {("get", "/info"), ("get", "/api/v1/master"), ("post", "/api/v1/auth/login"), ("post", "/api/v1/auth/session")}


@pytest.fixture(scope="module")
def doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    data_dir: Path = tmp_path_factory.mktemp("openapi") / "master"
    return create_app(MasterConfig(data_dir=data_dir, port=0)).openapi()


def _operations(doc: dict[str, Any]):
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            yield method, path, op


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref", "")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def test_create_experiment_declares_its_body(doc: dict[str, Any]) -> None:
    body = doc["paths"]["/api/v1/experiments"]["post"]["requestBody"]
    assert body["required"] is True
    schema = _resolve(doc, body["content"]["application/json"]["schema"])
    assert "config" in schema["required"]
    assert {"config", "modelDefinition", "activate", "validateOnly"} <= set(schema["properties"])


def test_bare_values_det_sends_are_declared(doc: dict[str, Any]) -> None:
    progress = doc["paths"]["/api/v1/trials/{trial_id}/progress"]["post"]["requestBody"]
    password = doc["paths"]["/api/v1/users/{user_id}/password"]["post"]["requestBody"]
    assert {"type": "number", "minimum": 0} in progress["content"]["application/json"]["schema"]["oneOf"]
    assert {"type": "string"} in password["content"]["application/json"]["schema"]["oneOf"]


def test_security_schemes_apply_to_every_operation_but_the_public_ones(doc: dict[str, Any]) -> None:
    schemes = doc["components"]["securitySchemes"]
    assert schemes["bearer"] == {"type": "http", "scheme": "bearer", "description": schemes["bearer"]["description"]}
    assert schemes["allocationToken"]["name"] == "Grpc-Metadata-x-allocation-token"
    for method, path, op in _operations(doc):
        if (method, path) in PUBLIC:
            assert "security" not in op, (method, path)
        else:
            assert {"bearer": []} in op["security"], (method, path)
            assert {"401", "403"} <= set(op["responses"]), (method, path)


def test_errors_are_400_never_422(doc: dict[str, Any]) -> None:
    assert "HTTPValidationError" not in doc["components"]["schemas"]
    for method, path, op in _operations(doc):
        assert "422" not in op["responses"], (method, path)
        if op.get("parameters") or op.get("requestBody"):
            assert op["responses"]["400"]["content"]["application/json"]["schema"] == {
                "$ref": "#/components/schemas/Error"
            }, (method, path)
        if "{" in path:
            assert "404" in op["responses"], (method, path)
        if op.get("requestBody"):
            assert "413" in op["responses"], (method, path)
    assert "429" in doc["paths"]["/api/v1/auth/login"]["post"]["responses"]
    assert "409" in doc["paths"]["/api/v1/users"]["post"]["responses"]


def test_streams_declare_their_media_types(doc: dict[str, Any]) -> None:
    logs = doc["paths"]["/api/v1/trials/{trial_id}/logs"]["get"]["responses"]["200"]["content"]
    tar = doc["paths"]["/api/v1/checkpoints/{uuid}/download"]["get"]["responses"]["200"]["content"]
    assert list(logs) == ["application/x-ndjson"]
    assert list(tar) == ["application/x-tar"]


def test_enum_like_parameters_list_their_values(doc: dict[str, Any]) -> None:
    act = doc["paths"]["/api/v1/experiments/{experiment_id}/{action}"]["post"]["parameters"]
    action = next(p for p in act if p["name"] == "action")
    assert action["schema"]["enum"] == ["kill", "pause", "activate", "cancel"]
    listing = doc["paths"]["/api/v1/experiments"]["get"]["parameters"]
    order_by = next(p for p in listing if p["name"] == "orderBy")
    assert "ORDER_BY_DESC" in str(order_by["schema"])


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [
        ("PUT", "/api/v1/experiments", "GET, POST"),  # two routes of one path: Allow names both
        ("GET", "/api/v1/auth/login", "POST"),
        ("DELETE", "/api/v1/experiments/1/trials", "GET"),  # not the POST of /experiments/{id}/{action}
    ],
)
def test_405_names_the_allowed_methods(client: TestClient, method: str, path: str, allow: str) -> None:
    r = client.request(method, path)
    assert r.status_code == 405
    assert r.headers["allow"] == allow
    body = r.json()
    assert body["message"].startswith("method not allowed")
    assert body["error"]["reason"] == "Method Not Allowed"
    assert "Internal" not in r.text
