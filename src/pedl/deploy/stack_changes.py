"""What an update would change, from the stack's current template and the new one (pure): whether it
changes anything, whether it restarts the master, and the changes `up` refuses because CloudFormation
would replace the master (it cannot while the data volume is attached: VolumeInUse) or the data."""

from __future__ import annotations

from typing import Any

from pedl.deploy import logical_ids as ids
from pedl.deploy.aws_session import DeployError

_KEEP = "keep the cluster's value, or `pedl deploy aws down` and `up` again for a new cluster"


def _properties(template: dict[str, Any], resource: str) -> dict[str, Any]:
    return dict((template.get("Resources") or {}).get(resource, {}).get("Properties") or {})


def _metadata(template: dict[str, Any]) -> dict[str, Any]:
    return dict((template.get("Metadata") or {}).get("pedl") or {})


def _subnet(template: dict[str, Any]) -> str:
    interfaces = _properties(template, ids.MASTER).get("NetworkInterfaces") or [{}]
    subnet = interfaces[0].get("SubnetId")
    return subnet if isinstance(subnet, str) else "a VPC of its own"


def master_changes(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """The master instance's properties the update changes (its user data, its type): each restarts it."""
    before, after = _properties(old, ids.MASTER), _properties(new, ids.MASTER)
    return sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))


def refused_changes(old: dict[str, Any], new: dict[str, Any]) -> list[DeployError]:
    out: list[DeployError] = []
    old_db, new_db = _metadata(old).get("db"), _metadata(new).get("db")
    if old_db and new_db and old_db != new_db:
        out.append(
            DeployError(
                f"the cluster was created with --db {old_db}; with --db {new_db} its master would "
                f"start on an empty database: {_KEEP}",
                option="db",
            )
        )
    old_key, new_key = _properties(old, ids.MASTER).get("KeyName"), _properties(new, ids.MASTER).get("KeyName")
    if old_key != new_key:
        out.append(
            DeployError(
                f"the cluster's master was created with the key pair {old_key!r}; another key pair "
                "replaces the master instance, which CloudFormation cannot do while the data volume "
                f"is attached to it: {_KEEP}",
                option="keypair",
            )
        )
    if _subnet(old) != _subnet(new):
        out.append(
            DeployError(
                f"the cluster's master is in {_subnet(old)}; another network replaces the master "
                f"instance and its data volume: {_KEEP}",
                option="subnet-id",
            )
        )
    elif _properties(old, ids.DATA_VOLUME).get("AvailabilityZone") != _properties(new, ids.DATA_VOLUME).get(
        "AvailabilityZone"
    ):
        out.append(
            DeployError(
                "another zone replaces the data volume with a new, empty one: give the zone the "
                f"cluster was created in: {_KEEP}",
                option="availability-zone",
            )
        )
    return out
