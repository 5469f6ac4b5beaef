"""The master.yaml a deployed master runs with, as a document: one pool whose provider is aws, the
cluster's tag pair, S3 checkpoints, the database and the TLS files. Values CloudFormation knows only
at deploy time are `${...}` placeholders (Fn::Sub) in the template; tests put sample values there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from pedl.deploy import logical_ids as ids
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_parts import placeholder

PEDL_HOME = "/usr/local/pedl"
CONFIG_PATH = f"{PEDL_HOME}/etc/master.yaml"  # the seeds' path, and the first `pedl master run` looks at
# What the user data writes: master.yaml less what only the instance may know (the database password).
CONFIG_TEMPLATE_PATH = f"{PEDL_HOME}/etc/master.yaml.in"
DATA_DIR = "/var/lib/pedl"  # the data volume's mount point: SQLite database, agent token, TLS files
SERVICE_USER = "pedl"
POOL_NAME = "default"
DB_NAME = "pedl"
DB_USER = "pedl"
DB_PORT = 5432
CHECKPOINT_PREFIX = "checkpoints"
# an Fn::Sub variable of the user data (the database's address), not a resource: see master_user_data.py
DB_HOST_VARIABLE = "DatabaseHost"


@dataclass(frozen=True)
class StackValues:
    """What master.yaml needs from the stack: in the template `${...}` placeholders, in tests samples."""

    region: str
    bucket: str
    agent_image_id: str
    agent_security_group_id: str
    subnet_id: str
    agent_instance_profile_arn: str
    db_host: str | None = None  # with db=rds


def stack_placeholders(options: DeployOptions) -> StackValues:
    """The Fn::Sub placeholders the template resolves (see template.py for the names)."""
    return StackValues(
        region="${AWS::Region}",
        bucket=placeholder(ids.BUCKET),
        agent_image_id=placeholder(ids.AGENT_IMAGE_PARAM),
        agent_security_group_id=placeholder(f"{ids.AGENT_SG}.GroupId"),
        subnet_id=options.subnet_id or placeholder(ids.SUBNET),
        agent_instance_profile_arn=placeholder(f"{ids.AGENT_PROFILE}.Arn"),
        db_host=placeholder(DB_HOST_VARIABLE) if options.db == "rds" else None,
    )


def tls_files(data_dir: str = DATA_DIR) -> tuple[str, str]:
    """(certificate chain, private key): made on the instance at first boot, kept on the data volume."""
    return f"{data_dir}/tls/master.crt", f"{data_dir}/tls/master.key"


def master_url(options: DeployOptions) -> str:
    """How agents reach the master: its private address, from the instance metadata at start."""
    if options.tls:
        return f"https://ec2.local-ipv4:{options.port}"
    return "ec2.local-ipv4"  # the seeds' alias; http and port 8080 are the defaults


def master_config_document(options: DeployOptions, values: StackValues, *, data_dir: str = DATA_DIR) -> dict[str, Any]:
    """master.yaml without the database password, which the instance reads from Secrets Manager.
    The agent token is not in it either: the instance makes it at first boot in data_dir/agent_token,
    where the master reads it (master/agent_token.py)."""
    tag_key, tag_value = options.tag_pair
    provider: dict[str, Any] = {
        "type": "aws",
        "master_url": master_url(options),
        "region": values.region,
        "image_id": values.agent_image_id,
        "ssh_key_name": options.keypair,
        "instance_type": list(options.agent_instance_types),
        "max_instances": options.max_instances,
        "spot": options.spot,
        "tag_key": tag_key,
        "tag_value": tag_value,
        "instance_name": f"pedl-{options.cluster_id}-agent",
        "iam_instance_profile_arn": values.agent_instance_profile_arn,
        "network_interface": {
            "public_ip": True,
            "security_group_id": values.agent_security_group_id,
            "subnet_id": values.subnet_id,
        },
    }
    doc: dict[str, Any] = {
        "port": options.port,
        "data_dir": data_dir,
        "cluster_name": options.cluster_id,
        "checkpoint_storage": {
            "type": "s3",
            "bucket": values.bucket,
            "prefix": CHECKPOINT_PREFIX,
            "region": values.region,
        },
        "resource_pools": [{"pool_name": POOL_NAME, "provider": provider}],
    }
    if options.db == "rds":
        if not values.db_host:
            raise ValueError("db_host: required with db=rds")
        # require: RDS forces TLS; verify-full would need the RDS CA bundle on the instance
        doc["db"] = {"host": values.db_host, "port": DB_PORT, "user": DB_USER, "name": DB_NAME, "ssl_mode": "require"}
    if options.tls:
        cert, key = tls_files(data_dir)
        doc["security"] = {"tls": {"cert": cert, "key": key}}
    return doc


def master_config_yaml(options: DeployOptions, values: StackValues, *, data_dir: str = DATA_DIR) -> str:
    return yaml.safe_dump(
        master_config_document(options, values, data_dir=data_dir), sort_keys=False, default_flow_style=False
    )
