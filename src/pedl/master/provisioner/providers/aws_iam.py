"""The EC2 calls the master may make: the seeds' IAM policy (plus the spot calls). `pedl deploy aws
iam-policy` and the deploy template print these, and the AWS provider refuses any other call."""

from __future__ import annotations

MASTER_EC2_ACTIONS = ("ec2:DescribeInstances", "ec2:TerminateInstances", "ec2:CreateTags", "ec2:RunInstances")
SPOT_EC2_ACTIONS = ("ec2:CancelSpotInstanceRequests", "ec2:RequestSpotInstances", "ec2:DescribeSpotInstanceRequests")
ALLOWED_OPERATIONS = frozenset(a.removeprefix("ec2:") for a in MASTER_EC2_ACTIONS + SPOT_EC2_ACTIONS)


class UnlistedOperation(RuntimeError):
    """A programming error: a call outside the seeds' IAM policy, which a real master cannot make."""
