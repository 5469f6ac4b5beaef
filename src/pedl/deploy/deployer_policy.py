"""The IAM policy of whoever runs `pedl deploy aws up|down|list|describe` (`iam-policy --deployer`):
CloudFormation on the clusters' stacks, what CloudFormation does with the deployer's permissions to
create, update and delete each resource type of the template, and the calls `up` and `down` make
themselves. Roles, instance profiles and buckets are limited to the names CloudFormation gives a
cluster's (pedl-ID-LogicalId-xxxx); the rest of EC2, RDS, SSM and Secrets Manager cannot be."""

from __future__ import annotations

from typing import Any

STACKS = "arn:aws:cloudformation:*:*:stack/pedl-*/*"
ROLES = ("arn:aws:iam::*:role/pedl-*", "arn:aws:iam::*:instance-profile/pedl-*")
BUCKETS = ("arn:aws:s3:::pedl-*", "arn:aws:s3:::pedl-*/*")

CLOUDFORMATION = (
    "cloudformation:CreateStack",
    "cloudformation:UpdateStack",
    "cloudformation:DeleteStack",
    "cloudformation:DescribeStackEvents",
    "cloudformation:GetTemplate",
    "cloudformation:ListStackResources",
    "cloudformation:DescribeStackResources",
)
_SG_RULES = (
    "ec2:AuthorizeSecurityGroupIngress",
    "ec2:AuthorizeSecurityGroupEgress",
    "ec2:RevokeSecurityGroupIngress",
    "ec2:RevokeSecurityGroupEgress",
    "ec2:DescribeSecurityGroupRules",
    "ec2:UpdateSecurityGroupRuleDescriptionsIngress",
    "ec2:UpdateSecurityGroupRuleDescriptionsEgress",
)
_TAGS = ("ec2:CreateTags", "ec2:DeleteTags")

# what CloudFormation calls for each resource type of the template, with the deployer's permissions
RESOURCE_ACTIONS: dict[str, tuple[str, ...]] = {
    "AWS::EC2::VPC": (
        "ec2:CreateVpc",
        "ec2:DeleteVpc",
        "ec2:DescribeVpcs",
        "ec2:ModifyVpcAttribute",
        "ec2:DescribeVpcAttribute",
        *_TAGS,
    ),
    "AWS::EC2::Subnet": (
        "ec2:CreateSubnet",
        "ec2:DeleteSubnet",
        "ec2:DescribeSubnets",
        "ec2:ModifySubnetAttribute",
        "ec2:DescribeAvailabilityZones",
        *_TAGS,
    ),
    "AWS::EC2::InternetGateway": (
        "ec2:CreateInternetGateway",
        "ec2:DeleteInternetGateway",
        "ec2:DescribeInternetGateways",
        *_TAGS,
    ),
    "AWS::EC2::VPCGatewayAttachment": (
        "ec2:AttachInternetGateway",
        "ec2:DetachInternetGateway",
        "ec2:DescribeInternetGateways",
    ),
    "AWS::EC2::RouteTable": ("ec2:CreateRouteTable", "ec2:DeleteRouteTable", "ec2:DescribeRouteTables", *_TAGS),
    "AWS::EC2::Route": ("ec2:CreateRoute", "ec2:DeleteRoute", "ec2:ReplaceRoute", "ec2:DescribeRouteTables"),
    "AWS::EC2::SubnetRouteTableAssociation": (
        "ec2:AssociateRouteTable",
        "ec2:DisassociateRouteTable",
        "ec2:DescribeRouteTables",
    ),
    "AWS::EC2::SecurityGroup": (
        "ec2:CreateSecurityGroup",
        "ec2:DeleteSecurityGroup",
        "ec2:DescribeSecurityGroups",
        *_SG_RULES,
        *_TAGS,
    ),
    "AWS::EC2::SecurityGroupIngress": _SG_RULES,
    "AWS::EC2::SecurityGroupEgress": _SG_RULES,
    "AWS::IAM::Role": (
        "iam:CreateRole",
        "iam:DeleteRole",
        "iam:GetRole",
        "iam:UpdateRole",
        "iam:PutRolePolicy",
        "iam:GetRolePolicy",
        "iam:DeleteRolePolicy",
        "iam:ListRolePolicies",
        "iam:ListAttachedRolePolicies",
        "iam:UpdateAssumeRolePolicy",
        "iam:UpdateRoleDescription",
        "iam:TagRole",
        "iam:UntagRole",
    ),
    "AWS::IAM::InstanceProfile": (
        "iam:CreateInstanceProfile",
        "iam:DeleteInstanceProfile",
        "iam:GetInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
    ),
    "AWS::S3::Bucket": (
        "s3:CreateBucket",
        "s3:DeleteBucket",
        "s3:PutEncryptionConfiguration",
        "s3:GetEncryptionConfiguration",
        "s3:PutBucketPublicAccessBlock",
        "s3:GetBucketPublicAccessBlock",
        "s3:PutBucketOwnershipControls",
        "s3:GetBucketOwnershipControls",
        "s3:PutBucketTagging",
        "s3:GetBucketTagging",
    ),
    "AWS::EC2::Volume": ("ec2:CreateVolume", "ec2:DeleteVolume", "ec2:DescribeVolumes", "ec2:ModifyVolume", *_TAGS),
    "AWS::EC2::VolumeAttachment": ("ec2:AttachVolume", "ec2:DetachVolume", "ec2:DescribeVolumes"),
    # the master's profile is passed to EC2; its AMI and the agents' come from SSM parameters
    "AWS::EC2::Instance": (
        "ec2:RunInstances",
        "ec2:TerminateInstances",
        "ec2:DescribeInstances",
        "ec2:StopInstances",
        "ec2:StartInstances",
        "ec2:ModifyInstanceAttribute",
        "ec2:DescribeInstanceAttribute",
        "ec2:AssociateIamInstanceProfile",
        "ec2:ReplaceIamInstanceProfileAssociation",
        "ec2:DescribeIamInstanceProfileAssociations",
        "iam:PassRole",
        "ssm:GetParameters",
        *_TAGS,
    ),
    "AWS::EC2::EIP": ("ec2:AllocateAddress", "ec2:ReleaseAddress", "ec2:DescribeAddresses", *_TAGS),
    "AWS::EC2::EIPAssociation": ("ec2:AssociateAddress", "ec2:DisassociateAddress", "ec2:DescribeAddresses"),
    # CloudFormation resolves the {{resolve:secretsmanager:...}} references with the deployer's permissions
    "AWS::SecretsManager::Secret": (
        "secretsmanager:CreateSecret",
        "secretsmanager:DeleteSecret",
        "secretsmanager:DescribeSecret",
        "secretsmanager:GetRandomPassword",
        "secretsmanager:GetSecretValue",
        "secretsmanager:UpdateSecret",
        "secretsmanager:TagResource",
    ),
    "AWS::RDS::DBSubnetGroup": (
        "rds:CreateDBSubnetGroup",
        "rds:DeleteDBSubnetGroup",
        "rds:DescribeDBSubnetGroups",
        "rds:ModifyDBSubnetGroup",
        "rds:AddTagsToResource",
    ),
    "AWS::RDS::DBInstance": (
        "rds:CreateDBInstance",
        "rds:DeleteDBInstance",
        "rds:DescribeDBInstances",
        "rds:ModifyDBInstance",
        "rds:AddTagsToResource",
        "rds:RemoveTagsFromResource",
        "rds:CreateDBSnapshot",
        "rds:DescribeDBSnapshots",
    ),
}

# what `up`, `down`, `list` and `describe` call themselves (besides CloudFormation on the stacks)
CLI_ACTIONS = (
    "cloudformation:DescribeStacks",  # `list` reads every stack of the region
    "ec2:DescribeKeyPairs",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeSubnets",
    "ec2:DescribeInstances",
    "ec2:DescribeSpotInstanceRequests",
    "ec2:CancelSpotInstanceRequests",
    "ec2:TerminateInstances",
    "ec2:StopInstances",
    "ec2:DescribeVolumes",
    "ec2:DeleteVolume",
    "ssm:GetParameter",
    "secretsmanager:DeleteSecret",
    "rds:DescribeDBSnapshots",
    "rds:DeleteDBSnapshot",
)
BUCKET_ACTIONS = (
    "s3:PutObject",
    "s3:GetObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
    "s3:ListBucket",
    "s3:ListBucketVersions",
    "s3:DeleteBucket",
)

# API operations whose IAM action has another name
_ACTION_OF_OPERATION = {
    ("s3", "HeadObject"): ("s3:GetObject",),
    ("s3", "HeadBucket"): ("s3:ListBucket",),
    ("s3", "ListObjectsV2"): ("s3:ListBucket",),
    ("s3", "ListObjectVersions"): ("s3:ListBucketVersions",),
    ("s3", "DeleteObjects"): ("s3:DeleteObject", "s3:DeleteObjectVersion"),
}


def actions_of_operation(service: str, operation: str) -> tuple[str, ...]:
    """The IAM actions an API call needs (service as IAM spells it: ec2, s3, cloudformation, ...)."""
    return _ACTION_OF_OPERATION.get((service, operation), (f"{service}:{operation}",))


def deployer_policy() -> dict[str, Any]:
    by_service: dict[str, set[str]] = {"iam": set(), "s3": set(), "other": set()}
    for action in [a for actions in RESOURCE_ACTIONS.values() for a in actions] + list(CLI_ACTIONS):
        service = action.split(":")[0]
        by_service[service if service in ("iam", "s3") else "other"].add(action)
    by_service["s3"].update(BUCKET_ACTIONS)
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Sid": "PedlDeployStacks", "Effect": "Allow", "Action": list(CLOUDFORMATION), "Resource": STACKS},
            {
                "Sid": "PedlDeployClusterRoles",
                "Effect": "Allow",
                "Action": sorted(by_service["iam"]),
                "Resource": list(ROLES),
            },
            {
                "Sid": "PedlDeployClusterBuckets",
                "Effect": "Allow",
                "Action": sorted(by_service["s3"]),
                "Resource": list(BUCKETS),
            },
            {"Sid": "PedlDeployResources", "Effect": "Allow", "Action": sorted(by_service["other"]), "Resource": "*"},
        ],
    }
