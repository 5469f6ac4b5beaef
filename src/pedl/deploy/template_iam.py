"""The stack's IAM: the master's role holds exactly the seeds' EC2 actions (the three spot calls with
spot) and iam:PassRole on the agents' role only; the agents' role reaches the checkpoint bucket and
nothing else. Both roles are the instances' through instance profiles."""

from __future__ import annotations

from typing import Any

from pedl.deploy import logical_ids as ids
from pedl.deploy.options import DeployOptions
from pedl.deploy.template_parts import get_att, placeholder, ref, sub, tags
from pedl.master.provisioner.providers.aws_iam import MASTER_EC2_ACTIONS, SPOT_EC2_ACTIONS

EC2_TRUST = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
# reading and writing checkpoints: objects, multipart uploads left behind, and listing the bucket
BUCKET_OBJECT_ACTIONS = ("s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload")
BUCKET_ACTIONS = ("s3:ListBucket", "s3:GetBucketLocation")


def master_ec2_actions(spot: bool) -> list[str]:
    """The seeds' EC2 actions, the ones the AWS provider is limited to making."""
    return [*MASTER_EC2_ACTIONS, *(SPOT_EC2_ACTIONS if spot else ())]


def bucket_statements(sid: str) -> list[dict[str, Any]]:
    return [
        {
            "Sid": f"{sid}Objects",
            "Effect": "Allow",
            "Action": list(BUCKET_OBJECT_ACTIONS),
            "Resource": sub("arn:${AWS::Partition}:s3:::" + placeholder(ids.BUCKET) + "/*"),
        },
        {
            "Sid": f"{sid}Bucket",
            "Effect": "Allow",
            "Action": list(BUCKET_ACTIONS),
            "Resource": get_att(ids.BUCKET, "Arn"),
        },
    ]


def iam_resources(options: DeployOptions) -> dict[str, Any]:
    master_statements: list[dict[str, Any]] = [
        {
            "Sid": "PedlMasterManagesAgents",
            "Effect": "Allow",
            "Action": master_ec2_actions(options.spot),
            "Resource": "*",
        },
        {
            "Sid": "PedlMasterPassesAgentRole",
            "Effect": "Allow",
            "Action": "iam:PassRole",
            "Resource": get_att(ids.AGENT_ROLE, "Arn"),
            "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
        },
        # the master deletes checkpoints no policy keeps, streams downloads and publishes its TLS CA
        *bucket_statements("PedlMasterCheckpoints"),
    ]
    if options.db == "rds":
        master_statements.append(
            {
                "Sid": "PedlMasterReadsDatabaseSecret",
                "Effect": "Allow",
                "Action": "secretsmanager:GetSecretValue",
                "Resource": ref(ids.DB_SECRET),
            }
        )
    return {
        ids.MASTER_ROLE: {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": f"pedl master of cluster {options.cluster_id}",
                "AssumeRolePolicyDocument": EC2_TRUST,
                "Policies": [
                    {
                        "PolicyName": "pedl-master",
                        "PolicyDocument": {"Version": "2012-10-17", "Statement": master_statements},
                    }
                ],
                "Tags": tags(options),
            },
        },
        ids.MASTER_PROFILE: {"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [ref(ids.MASTER_ROLE)]}},
        ids.AGENT_ROLE: {
            "Type": "AWS::IAM::Role",
            "Properties": {
                "Description": f"pedl agents of cluster {options.cluster_id}: the checkpoint bucket only",
                "AssumeRolePolicyDocument": EC2_TRUST,
                "Policies": [
                    {
                        "PolicyName": "pedl-agent",
                        "PolicyDocument": {
                            "Version": "2012-10-17",
                            "Statement": bucket_statements("PedlAgentCheckpoints"),
                        },
                    }
                ],
                "Tags": tags(options),
            },
        },
        ids.AGENT_PROFILE: {"Type": "AWS::IAM::InstanceProfile", "Properties": {"Roles": [ref(ids.AGENT_ROLE)]}},
    }
