"""Sample values for what CloudFormation fills into the master's user data and master.yaml."""

from __future__ import annotations

from pedl.deploy import logical_ids as ids
from pedl.deploy.master_config_doc import DB_HOST_VARIABLE, StackValues

REGION = "us-east-1"
BUCKET = "pedl-demo-checkpointbucket-1a2b3c4d5e6f"
AGENT_AMI = "ami-0fedcba9876543210"
AGENT_SG = "sg-0123456789abcdef0"
CREATED_SUBNET = "subnet-0fedcba9876543210"
AGENT_PROFILE = "arn:aws:iam::123456789012:instance-profile/pedl-demo-AgentInstanceProfile-ABCDEF123456"
DB_HOST = "pedl-demo-database-abc123.cxyz.us-east-1.rds.amazonaws.com"
DB_SECRET = "arn:aws:secretsmanager:us-east-1:123456789012:secret:DatabaseSecret-AbCdEf"
VOLUME = "vol-0123456789abcdef0"
ELASTIC_IP = "203.0.113.77"


def stack_values(subnet: str | None = None, rds: bool = True) -> StackValues:
    return StackValues(
        region=REGION,
        bucket=BUCKET,
        agent_image_id=AGENT_AMI,
        agent_security_group_id=AGENT_SG,
        subnet_id=subnet or CREATED_SUBNET,
        agent_instance_profile_arn=AGENT_PROFILE,
        db_host=DB_HOST if rds else None,
    )


# what Fn::Sub replaces each placeholder of the user data with
SUBSTITUTIONS = {
    "AWS::Region": REGION,
    ids.BUCKET: BUCKET,
    ids.AGENT_IMAGE_PARAM: AGENT_AMI,
    f"{ids.AGENT_SG}.GroupId": AGENT_SG,
    ids.SUBNET: CREATED_SUBNET,
    f"{ids.AGENT_PROFILE}.Arn": AGENT_PROFILE,
    DB_HOST_VARIABLE: DB_HOST,
    ids.DB_SECRET: DB_SECRET,
    ids.DATA_VOLUME: VOLUME,
    ids.ELASTIC_IP: ELASTIC_IP,
}
