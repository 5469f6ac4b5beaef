"""Small builders the template's modules share: intrinsic functions and the cluster's tags."""

from __future__ import annotations

from typing import Any

from pedl.deploy.options import DeployOptions


def ref(name: str) -> dict[str, str]:
    return {"Ref": name}


def get_att(name: str, attribute: str) -> dict[str, list[str]]:
    return {"Fn::GetAtt": [name, attribute]}


def placeholder(name: str) -> str:
    """`${name}`: what Fn::Sub replaces with a parameter's, resource's or attribute's value."""
    return "${" + name + "}"


def sub(text: str) -> dict[str, str]:
    return {"Fn::Sub": text}


def tags(options: DeployOptions, name: str | None = None) -> list[dict[str, str]]:
    """The cluster's tag pair (and a Name): on every resource that takes tags."""
    key, value = options.tag_pair
    out = [{"Key": "Name", "Value": name}] if name else []
    return [*out, {"Key": key, "Value": value}]


def retained(resource: dict[str, Any], policy: str = "Retain") -> dict[str, Any]:
    """Kept (or snapshotted) when the stack is deleted and when an update replaces it."""
    return {**resource, "DeletionPolicy": policy, "UpdateReplacePolicy": policy}
