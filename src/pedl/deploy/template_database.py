"""With db=rds: a PostgreSQL instance whose password Secrets Manager generates. The template refers to
the secret only by dynamic reference, so the password is in no template, user data or output; the
master reads it at boot through its role. The database is snapshotted on delete, the secret kept
(a snapshot is useless without its password)."""

from __future__ import annotations

import json
from typing import Any

from pedl.deploy import logical_ids as ids
from pedl.deploy.master_config_doc import DB_NAME, DB_PORT, DB_USER
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_parts import get_att, placeholder, ref, retained, sub, tags

DB_INSTANCE_CLASS = "db.t4g.micro"  # about 12 USD a month: the master's metadata is small
DB_STORAGE_GB = "20"
DB_BACKUP_DAYS = 7
# characters RDS refuses in a master password, and the space
PASSWORD_EXCLUDES = "\"@/\\ '`"


def database_resources(options: DeployOptions) -> dict[str, Any]:
    if options.db != "rds":
        return {}
    name = f"pedl-{options.cluster_id}"
    subnets = (
        list(options.db_subnet_ids) if not options.creates_network else [ref(ids.DB_SUBNET_A), ref(ids.DB_SUBNET_B)]
    )

    def secret(key: str) -> dict[str, str]:  # a dynamic reference: resolved by CloudFormation, never shown
        return sub("{{resolve:secretsmanager:" + placeholder(ids.DB_SECRET) + ":SecretString:" + key + "}}")

    return {
        ids.DB_SECRET: retained(
            {
                "Type": "AWS::SecretsManager::Secret",
                "Properties": {
                    "Description": f"pedl cluster {options.cluster_id}: the master's PostgreSQL login",
                    "GenerateSecretString": {
                        "SecretStringTemplate": json.dumps({"username": DB_USER}),
                        "GenerateStringKey": "password",
                        "PasswordLength": 32,
                        "ExcludeCharacters": PASSWORD_EXCLUDES,
                    },
                    "Tags": tags(options, f"{name}-database"),
                },
            }
        ),
        ids.DB_SUBNET_GROUP: {
            "Type": "AWS::RDS::DBSubnetGroup",
            "Properties": {
                "DBSubnetGroupDescription": f"pedl database of cluster {options.cluster_id}",
                "SubnetIds": subnets,
                "Tags": tags(options, f"{name}-database"),
            },
        },
        ids.DATABASE: retained(
            {
                "Type": "AWS::RDS::DBInstance",
                "Properties": {
                    "Engine": "postgres",
                    "DBInstanceClass": DB_INSTANCE_CLASS,
                    "AllocatedStorage": DB_STORAGE_GB,
                    "StorageType": "gp3",
                    "StorageEncrypted": True,
                    "DBName": DB_NAME,
                    "Port": str(DB_PORT),
                    "MasterUsername": secret("username"),
                    "MasterUserPassword": secret("password"),
                    "DBSubnetGroupName": ref(ids.DB_SUBNET_GROUP),
                    "VPCSecurityGroups": [get_att(ids.DB_SG, "GroupId")],
                    "PubliclyAccessible": False,
                    "MultiAZ": False,
                    "BackupRetentionPeriod": DB_BACKUP_DAYS,
                    "CopyTagsToSnapshot": True,
                    "Tags": tags(options, f"{name}-database"),
                },
            },
            policy="Snapshot",
        ),
    }
